//! The packet layer: bytes of a PT stream to packets (Intel SDM vol. 3C,
//! chapter "Intel Processor Trace", section "Packet Definitions").
//!
//! Decoding is stateless per packet except for one thing: between a BBP and
//! its BEP, a byte whose low three bits are `100` opens a BIP, not a short
//! TNT, and the BIP's size comes from the BBP. [`Packets`] keeps that context.

use crate::Error;

/// The 16 bytes of a PSB, the stream's synchronisation point.
pub const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

/// One decoded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    Pad,
    Psb,
    PsbEnd,
    Ovf,
    /// `TraceStop`: tracing stopped on an address filter or by software.
    Stop,
    /// Outcomes of conditional branches, the oldest in bit `count - 1`.
    Tnt {
        bits: u64,
        count: u8,
        long: bool,
    },
    /// TIP, TIP.PGE, TIP.PGD or FUP with its (compressed) target.
    Ip {
        kind: IpKind,
        ip: Ip,
    },
    ModeExec {
        cs_l: bool,
        cs_d: bool,
        interrupts: bool,
    },
    ModeTsx {
        intx: bool,
        abort: bool,
    },
    /// Paging information: the new CR3 and whether it is a non-root guest.
    Pip {
        cr3: u64,
        nr: bool,
    },
    Tsc(u64),
    /// Core:bus ratio.
    Cbr(u8),
    Tma {
        ctc: u16,
        fast: u16,
    },
    Mtc(u8),
    Cyc(u64),
    Vmcs(u64),
    /// Maintenance packet: model-specific, payload only shown.
    Mnt(u64),
    Exstop {
        ip: bool,
    },
    Mwait {
        hints: u32,
        ext: u32,
    },
    /// Power entry; C-states are encoded minus one, modulo 16 (0xf is C0).
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// Power exit; `wake` holds the wake-reason bits [`WAKE_INT`] etc.
    Pwrx {
        last: u8,
        deepest: u8,
        wake: u8,
    },
    /// PTWRITE; `size` is the payload size code (0: 4 bytes, 1: 8 bytes).
    Ptw {
        payload: u64,
        size: u8,
        ip: bool,
    },
    /// Control-flow event of `kind` ([`cfe_name`]) with its vector.
    Cfe {
        kind: u8,
        vector: u8,
        ip: bool,
    },
    /// Event data attached to the next CFE.
    Evd {
        kind: u8,
        payload: u64,
    },
    /// Trigger: a condition `id` met, `icnt` instructions since the last IP.
    Trig {
        id: u8,
        icnt: Option<u16>,
        ip: bool,
        mult: bool,
    },
    /// Block begin: PEBS records follow as BIPs until the BEP.
    Bbp {
        wide: bool,
        kind: u8,
    },
    Bip {
        id: u8,
        payload: u64,
    },
    Bep {
        ip: bool,
    },
    /// Bytes the CPU is known to emit corrupted (an erratum); skipped.
    Invalid {
        len: u8,
    },
}

/// PWRX wake reasons.
pub const WAKE_INT: u8 = 0x1;
pub const WAKE_STORE: u8 = 0x4;
pub const WAKE_HW: u8 = 0x8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpKind {
    Tip,
    TipPge,
    TipPgd,
    Fup,
}

/// An IP as the packet carries it: `compression` (`IPBytes`) says which bytes
/// are present; the rest come from the last IP seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip {
    pub compression: u8,
    pub bits: u64,
}

impl Ip {
    /// The full address given the last IP, or `None` when the packet
    /// suppressed it (compression 0).
    pub fn resolve(self, last: u64) -> Option<u64> {
        match self.compression {
            0 => None,
            1 => Some(last & !0xffff | self.bits),
            2 => Some(last & !0xffff_ffff | self.bits),
            // Bits 63:48 sign-extend bit 47.
            3 => Some(((self.bits << 16).cast_signed() >> 16).cast_unsigned()),
            4 => Some(last & !0xffff_ffff_ffff | self.bits),
            _ => Some(self.bits),
        }
    }
}

/// A decoding error's kind; [`Error::Decode`] adds the offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The first byte(s) match no packet.
    Opcode,
    /// The opcode is known but the payload is malformed (reserved bits set,
    /// a PSB cut short).
    Packet,
    /// The stream ends inside a packet.
    Truncated,
}

impl Fault {
    pub fn message(self) -> &'static str {
        match self {
            Fault::Opcode => "unknown opcode",
            Fault::Packet => "unknown packet",
            Fault::Truncated => "unexpected end of trace",
        }
    }
}

/// What decoding one packet depends on besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// Inside a BBP/BEP block: BIPs are 8 bytes wide (`Some(true)`) or 4.
    pub block: Option<bool>,
    /// Erratum SKZ84: in a VMX guest with TSC offsetting or scaling, a TMA
    /// carries corrupted values and is followed by one bogus byte.
    pub skz84: bool,
    /// Erratum SKD007: an OVF may replace the rest of a multi-byte CYC.
    pub skd007: bool,
}

/// A walk over the packets of a PT byte stream; cloning it reads ahead.
#[derive(Clone)]
pub struct Packets<'a> {
    buf: &'a [u8],
    pos: usize,
    context: Context,
    last_sync: Option<usize>,
}

impl<'a> Packets<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self::with_errata(buf, crate::Errata::default())
    }

    pub fn with_errata(buf: &'a [u8], errata: crate::Errata) -> Self {
        let context = Context {
            block: None,
            skz84: errata.skz84,
            skd007: errata.skd007,
        };
        Packets {
            buf,
            pos: 0,
            context,
            last_sync: None,
        }
    }

    /// Offset of the next packet.
    pub fn offset(&self) -> usize {
        self.pos
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Move to the next PSB that starts after the last one synced to and
    /// ends after the current position (so a PSB the cursor sits inside of,
    /// as after an error, is found). Returns false when there is none.
    pub fn sync_forward(&mut self) -> bool {
        let from = self
            .last_sync
            .map_or(0, |s| s + 1)
            .max(self.pos.saturating_sub(PSB.len() - 1));
        let Some(at) = find_psb(self.buf, from) else {
            self.pos = self.buf.len();
            return false;
        };
        self.pos = at;
        self.last_sync = Some(at);
        self.context.block = None;
        true
    }

    /// Move to the PSB at `at`, as a decoder that starts a PSB+ over does.
    pub fn sync_at(&mut self, at: usize) {
        self.pos = at;
        self.last_sync = Some(at);
        self.context.block = None;
    }

    /// Decode the packet at the current offset and step past it. On an
    /// error the position stays, so the caller can `sync_forward`.
    pub fn next_packet(&mut self) -> Option<Result<(usize, Packet), Error>> {
        if self.at_end() {
            return None;
        }
        let at = self.pos;
        Some(match decode(&self.buf[at..], self.context) {
            Ok((mut packet, mut len)) => {
                if self.context.skd007 && self.is_skd007(at, &packet, len) {
                    // Not a CYC: its first byte, then an OVF cut into it
                    // (listed at the CYC's offset, as ptdump does).
                    (packet, len) = (Packet::Ovf, 3);
                }
                self.pos = at + len;
                match packet {
                    Packet::Bbp { wide, .. } => self.context.block = Some(wide),
                    Packet::Bep { .. } | Packet::Psb | Packet::Ovf => self.context.block = None,
                    _ => {}
                }
                Ok((at, packet))
            }
            Err(fault) => Err(Error::Decode {
                offset: at as u64,
                fault,
            }),
        })
    }
}

impl Packets<'_> {
    /// SKD007: an OVF may be issued after the first byte of a multi-byte
    /// CYC, instead of its remaining bytes (the erratum). A 2-byte CYC
    /// whose second byte is the extended opcode (0x02, no continuation)
    /// and is followed by 0xf3 is that OVF; a real CYC would not end this
    /// short twice in a row (libipt reads it the same way).
    fn is_skd007(&self, at: usize, packet: &Packet, len: usize) -> bool {
        matches!(packet, Packet::Cyc(_))
            && len == 2
            && self.buf.get(at + 1) == Some(&0x02)
            && self.buf.get(at + 2) == Some(&0xf3)
    }
}

impl Iterator for Packets<'_> {
    type Item = Result<(usize, Packet), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_packet()
    }
}

/// First offset at or after `from` where a whole PSB starts.
pub fn find_psb(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    tail.windows(PSB.len())
        .position(|w| w == PSB)
        .map(|p| from + p)
}

/// A little-endian unsigned value of up to 8 bytes.
pub(crate) fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0, |acc, &b| acc << 8 | u64::from(b))
}

/// `n` (at most 8) bytes of payload starting at `at`, or `Truncated`.
#[inline]
fn payload(buf: &[u8], at: usize, n: usize) -> Result<u64, Fault> {
    // The hot path: one unaligned load where 8 bytes are there to read.
    if let Some(word) = buf.get(at..at + 8) {
        let value = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let mask = 1u64
            .checked_shl(8 * n as u32)
            .map_or(u64::MAX, |bit| bit - 1);
        return Ok(value & mask);
    }
    buf.get(at..at + n).map(le).ok_or(Fault::Truncated)
}

/// Decode one packet at the start of `buf`; returns it and its size.
#[inline]
pub fn decode(buf: &[u8], context: Context) -> Result<(Packet, usize), Fault> {
    let b = buf[0];
    if let Some(wide) = context.block
        && b & 0x07 == 0x04
    {
        let n = if wide { 8 } else { 4 };
        let payload = payload(buf, 1, n)?;
        return Ok((
            Packet::Bip {
                id: b >> 3,
                payload,
            },
            1 + n,
        ));
    }
    match b {
        0x00 => Ok((Packet::Pad, 1)),
        0x02 => decode_ext(buf, context.skz84),
        0x19 => Ok((Packet::Tsc(payload(buf, 1, 7)?), 8)),
        0x59 => Ok((Packet::Mtc(payload(buf, 1, 1)? as u8), 2)),
        0x99 => decode_mode(buf),
        0xd9 => decode_trig(buf),
        _ if b & 1 == 0 => decode_tnt8(b),
        _ if b & 3 == 3 => decode_cyc(buf),
        _ => decode_ip(buf),
    }
}

#[inline]
fn decode_tnt8(b: u8) -> Result<(Packet, usize), Fault> {
    // The highest set bit stops the list; bit 0 is the opcode.
    let stop = 7 - b.leading_zeros() as u8;
    if stop < 2 {
        return Err(Fault::Packet);
    }
    let count = stop - 1;
    let bits = u64::from(b >> 1) & ((1 << count) - 1);
    Ok((
        Packet::Tnt {
            bits,
            count,
            long: false,
        },
        1,
    ))
}

#[inline]
fn decode_ip(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let b = buf[0];
    let kind = match b & 0x1f {
        0x0d => IpKind::Tip,
        0x11 => IpKind::TipPge,
        0x01 => IpKind::TipPgd,
        0x1d => IpKind::Fup,
        _ => return Err(Fault::Opcode),
    };
    let compression = b >> 5;
    let n = match compression {
        0 => 0,
        1 => 2,
        2 => 4,
        3 | 4 => 6,
        6 => 8,
        _ => return Err(Fault::Packet),
    };
    let bits = payload(buf, 1, n)?;
    Ok((
        Packet::Ip {
            kind,
            ip: Ip { compression, bits },
        },
        1 + n,
    ))
}

fn decode_cyc(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let mut value = u64::from(buf[0] >> 3);
    let mut more = buf[0] & 4 != 0;
    let mut len = 1;
    let mut shift = 5;
    while more {
        let b = *buf.get(len).ok_or(Fault::Truncated)?;
        if shift >= 64 {
            return Err(Fault::Packet);
        }
        value |= u64::from(b >> 1) << shift;
        shift += 7;
        more = b & 1 != 0;
        len += 1;
    }
    Ok((Packet::Cyc(value), len))
}

fn decode_mode(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let b = payload(buf, 1, 1)? as u8;
    let bit = |n: u8| b & (1 << n) != 0;
    match b >> 5 {
        0 => Ok((
            Packet::ModeExec {
                cs_l: bit(0),
                cs_d: bit(1),
                interrupts: bit(2),
            },
            2,
        )),
        1 => Ok((
            Packet::ModeTsx {
                intx: bit(0),
                abort: bit(1),
            },
            2,
        )),
        _ => Err(Fault::Packet),
    }
}

fn decode_trig(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let flags = payload(buf, 1, 1)? as u8;
    let id = payload(buf, 2, 1)? as u8;
    let (icnt, len) = if flags & 0x40 != 0 {
        (Some(payload(buf, 3, 2)? as u16), 5)
    } else {
        (None, 3)
    };
    Ok((
        Packet::Trig {
            id,
            icnt,
            ip: flags & 0x80 != 0,
            mult: flags & 0x20 != 0,
        },
        len,
    ))
}

fn decode_ext(buf: &[u8], skz84: bool) -> Result<(Packet, usize), Fault> {
    let e = *buf.get(1).ok_or(Fault::Truncated)?;
    let packet = match e {
        0x23 => (Packet::PsbEnd, 2),
        0x82 => return decode_psb(buf),
        0xf3 => (Packet::Ovf, 2),
        0x83 => (Packet::Stop, 2),
        0xa3 => return decode_tnt64(buf),
        0x43 => {
            let p = payload(buf, 2, 6)?;
            (
                Packet::Pip {
                    cr3: (p >> 1) << 5,
                    nr: p & 1 != 0,
                },
                8,
            )
        }
        0x03 => (Packet::Cbr(payload(buf, 2, 2)? as u8), 4),
        0x73 if skz84 => {
            payload(buf, 2, 6)?;
            (Packet::Invalid { len: 8 }, 8)
        }
        0x73 => return decode_tma(buf),
        0xc8 => (Packet::Vmcs(payload(buf, 2, 5)? << 12), 7),
        0xc3 => {
            if payload(buf, 2, 1)? != 0x88 {
                return Err(Fault::Opcode);
            }
            (Packet::Mnt(payload(buf, 3, 8)?), 11)
        }
        0x62 | 0xe2 => (Packet::Exstop { ip: e & 0x80 != 0 }, 2),
        0xc2 => {
            let hints = payload(buf, 2, 4)? as u32;
            let ext = payload(buf, 6, 4)? as u32;
            (Packet::Mwait { hints, ext }, 10)
        }
        0x22 => {
            let flags = payload(buf, 2, 1)? as u8;
            let state = payload(buf, 3, 1)? as u8;
            let packet = Packet::Pwre {
                state: state >> 4,
                sub_state: state & 0xf,
                hw: flags & 0x08 != 0,
            };
            (packet, 4)
        }
        0xa2 => {
            let p = payload(buf, 2, 5)?;
            let packet = Packet::Pwrx {
                last: (p >> 4) as u8 & 0xf,
                deepest: p as u8 & 0xf,
                wake: (p >> 8) as u8 & 0xf,
            };
            (packet, 7)
        }
        0x13 => {
            let b = payload(buf, 2, 1)? as u8;
            let vector = payload(buf, 3, 1)? as u8;
            (
                Packet::Cfe {
                    kind: b & 0x1f,
                    vector,
                    ip: b & 0x80 != 0,
                },
                4,
            )
        }
        0x53 => {
            let kind = payload(buf, 2, 1)? as u8 & 0x3f;
            (
                Packet::Evd {
                    kind,
                    payload: payload(buf, 3, 8)?,
                },
                11,
            )
        }
        0x63 => {
            let b = payload(buf, 2, 1)? as u8;
            (
                Packet::Bbp {
                    wide: b & 0x80 != 0,
                    kind: b & 0x1f,
                },
                3,
            )
        }
        0x33 | 0xb3 => (Packet::Bep { ip: e & 0x80 != 0 }, 2),
        _ if e & 0x1f == 0x12 => return decode_ptw(buf, e),
        _ => return Err(Fault::Opcode),
    };
    Ok(packet)
}

fn decode_psb(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let have = buf.len().min(PSB.len());
    if buf[..have] != PSB[..have] {
        return Err(Fault::Packet);
    }
    if have < PSB.len() {
        return Err(Fault::Truncated);
    }
    Ok((Packet::Psb, PSB.len()))
}

fn decode_tnt64(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let p = payload(buf, 2, 6)?;
    if p == 0 {
        return Err(Fault::Packet);
    }
    let count = 63 - p.leading_zeros() as u8;
    let bits = p & ((1 << count) - 1);
    Ok((
        Packet::Tnt {
            bits,
            count,
            long: true,
        },
        8,
    ))
}

fn decode_tma(buf: &[u8]) -> Result<(Packet, usize), Fault> {
    let ctc = payload(buf, 2, 2)? as u16;
    let reserved = payload(buf, 4, 1)?;
    let fast = payload(buf, 5, 2)? as u16;
    // Byte 4 and bits 15:9 of the fast counter are reserved and zero.
    if reserved != 0 || fast & !0x1ff != 0 {
        return Err(Fault::Packet);
    }
    Ok((Packet::Tma { ctc, fast }, 7))
}

fn decode_ptw(buf: &[u8], e: u8) -> Result<(Packet, usize), Fault> {
    let size = (e >> 5) & 3;
    let n = match size {
        0 => 4,
        1 => 8,
        _ => return Err(Fault::Packet),
    };
    let payload = payload(buf, 2, n)?;
    Ok((
        Packet::Ptw {
            payload,
            size,
            ip: e & 0x80 != 0,
        },
        2 + n,
    ))
}

/// The code width MODE.Exec's CS.L and CS.D bits give (libipt's
/// `pt_get_exec_mode`); `None` for both set, which no mode is.
pub fn exec_bits(cs_l: bool, cs_d: bool) -> Option<u32> {
    match (cs_l, cs_d) {
        (true, true) => None,
        (true, false) => Some(64),
        (false, true) => Some(32),
        (false, false) => Some(16),
    }
}

/// The C-state a PWRE/PWRX field names: they are encoded minus one, modulo
/// 16 (0xf is C0).
pub fn c_state(encoded: u8) -> u8 {
    (encoded + 1) & 0xf
}

/// The wake reason of a PWRX, as ptdump and ptxed name it.
pub fn wake_name(wake: u8) -> &'static str {
    if wake & WAKE_INT != 0 {
        "int"
    } else if wake & WAKE_STORE != 0 {
        "st"
    } else if wake & WAKE_HW != 0 {
        "hw"
    } else {
        "none"
    }
}

/// Name of a CFE type, as ptdump prints it.
pub fn cfe_name(kind: u8) -> &'static str {
    match kind {
        1 => "intr",
        2 => "iret",
        3 => "smi",
        4 => "rsm",
        5 => "sipi",
        6 => "init",
        7 => "vmentry",
        8 => "vmexit",
        9 => "vmexit_intr",
        10 => "shutdown",
        12 => "uintr",
        13 => "uiret",
        14 => "swintr",
        15 => "syscall",
        _ => "unknown",
    }
}

/// Whether a CFE of this type carries a meaningful vector.
pub fn cfe_has_vector(kind: u8) -> bool {
    matches!(kind, 1 | 5 | 9 | 12 | 14)
}

/// Name of an EVD type, as ptdump prints it.
pub fn evd_name(kind: u8) -> &'static str {
    match kind {
        0 => "cr2",
        1 => "vmxq",
        2 => "vmxr",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> (Packet, usize) {
        decode(bytes, Context::default()).unwrap()
    }

    #[test]
    fn short_tnt_lists_oldest_first_below_the_stop_bit() {
        // 0110_0010: stop at bit 6, outcomes 1 0 0 0 1.
        assert_eq!(
            one(&[0x62]),
            (
                Packet::Tnt {
                    bits: 0b10001,
                    count: 5,
                    long: false
                },
                1
            )
        );
        assert_eq!(decode(&[0x02], Context::default()), Err(Fault::Truncated));
        assert_eq!(
            decode(&[0x02, 0x00], Context::default()),
            Err(Fault::Opcode)
        );
    }

    #[test]
    fn ip_compression_fills_the_missing_bytes_from_the_last_ip() {
        let last = 0xffff_8000_1234_5678;
        assert_eq!(
            Ip {
                compression: 1,
                bits: 0xabcd
            }
            .resolve(last),
            Some(0xffff_8000_1234_abcd)
        );
        assert_eq!(
            Ip {
                compression: 2,
                bits: 0xabcd
            }
            .resolve(last),
            Some(0xffff_8000_0000_abcd)
        );
        assert_eq!(
            Ip {
                compression: 3,
                bits: 0x8000_0000_0000
            }
            .resolve(0),
            Some(0xffff_8000_0000_0000)
        );
        assert_eq!(
            Ip {
                compression: 4,
                bits: 0x1
            }
            .resolve(last),
            Some(0xffff_0000_0000_0001)
        );
        assert_eq!(
            Ip {
                compression: 0,
                bits: 0
            }
            .resolve(last),
            None
        );
    }

    #[test]
    fn cycle_counts_continue_over_extension_bytes() {
        assert_eq!(one(&[0xbf, 0x04]), (Packet::Cyc(0x57), 2));
        assert_eq!(
            decode(&[0xbf, 0x05], Context::default()),
            Err(Fault::Truncated)
        );
    }

    #[test]
    fn a_psb_cut_short_is_malformed_and_one_at_the_end_truncated() {
        assert_eq!(
            decode(&[0x02, 0x82, 0x02, 0x83], Context::default()),
            Err(Fault::Packet)
        );
        assert_eq!(
            decode(&PSB[..10], Context::default()),
            Err(Fault::Truncated)
        );
        assert_eq!(one(&PSB), (Packet::Psb, 16));
    }

    #[test]
    fn sync_finds_a_psb_the_cursor_is_inside_of() {
        let mut buf = vec![0u8; 3];
        buf.extend_from_slice(&PSB);
        let mut packets = Packets::new(&buf);
        packets.pos = 7;
        assert!(packets.sync_forward());
        assert_eq!(packets.offset(), 3);
        assert!(!packets.sync_forward(), "the same PSB is not found twice");
    }

    #[test]
    fn bip_is_recognised_only_inside_a_block() {
        let buf = [0x02, 0x63, 0x00, 0x0c, 1, 2, 3, 4, 0x02, 0x33, 0x0c];
        let kinds: Vec<_> = Packets::new(&buf).map(|p| p.unwrap().1).collect();
        assert_eq!(
            kinds,
            [
                Packet::Bbp {
                    wide: false,
                    kind: 0
                },
                Packet::Bip {
                    id: 1,
                    payload: 0x0403_0201
                },
                Packet::Bep { ip: false },
                Packet::Tnt {
                    bits: 0b10,
                    count: 2,
                    long: false
                },
            ]
        );
    }
}
