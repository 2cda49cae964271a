//! Writing PT: packets as the SDM encodes them, and the trace a CPU would
//! record for a known path through code. Tests use it to check the decoder
//! against paths they chose; the benchmark uses it to make large traces.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};

use crate::image::Image;
use crate::packet::IpKind;

/// Packets, appended in order.
#[derive(Debug, Default)]
pub struct Encoder {
    bytes: Vec<u8>,
    last_ip: u64,
}

impl Encoder {
    pub fn new() -> Self {
        Encoder::default()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// PSB, which also forgets the last IP (IPs after it compress against 0).
    pub fn psb(&mut self) {
        self.bytes.extend([0x02, 0x82].repeat(8));
        self.last_ip = 0;
    }

    pub fn psbend(&mut self) {
        self.bytes.extend([0x02, 0x23]);
    }

    pub fn pad(&mut self) {
        self.bytes.push(0);
    }

    pub fn ovf(&mut self) {
        self.bytes.extend([0x02, 0xf3]);
    }

    /// A short TNT of 1 to 6 outcomes, oldest first.
    pub fn tnt(&mut self, taken: &[bool]) {
        assert!(
            (1..=6).contains(&taken.len()),
            "a short TNT holds 1 to 6 bits"
        );
        let payload = taken.iter().fold(1u8, |acc, &t| acc << 1 | u8::from(t));
        self.bytes.push(payload << 1);
    }

    /// TIP, TIP.PGE, TIP.PGD or FUP; `None` suppresses the IP. The IP is
    /// compressed against the last one as much as it can be.
    pub fn ip(&mut self, kind: IpKind, ip: Option<u64>) {
        let opcode = match kind {
            IpKind::Tip => 0x0d,
            IpKind::TipPge => 0x11,
            IpKind::TipPgd => 0x01,
            IpKind::Fup => 0x1d,
        };
        let Some(ip) = ip else {
            self.bytes.push(opcode);
            return;
        };
        let (compression, len) = if ip >> 16 == self.last_ip >> 16 {
            (1, 2)
        } else if ip >> 32 == self.last_ip >> 32 {
            (2, 4)
        } else if ip >> 48 == self.last_ip >> 48 {
            (4, 6)
        } else {
            (6, 8)
        };
        self.bytes.push(compression << 5 | opcode);
        self.bytes.extend(&ip.to_le_bytes()[..len]);
        self.last_ip = ip;
    }

    pub fn tsc(&mut self, tsc: u64) {
        self.bytes.push(0x19);
        self.bytes.extend(&tsc.to_le_bytes()[..7]);
    }

    pub fn mtc(&mut self, ctc: u8) {
        self.bytes.extend([0x59, ctc]);
    }

    /// TMA: the crystal clock's low 16 bits and the fast counter (9 bits).
    pub fn tma(&mut self, ctc: u16, fast: u16) {
        let [c0, c1] = ctc.to_le_bytes();
        let [f0, f1] = (fast & 0x1ff).to_le_bytes();
        self.bytes.extend([0x02, 0x73, c0, c1, 0, f0, f1]);
    }

    /// CYC: 5 bits in the header, 7 in each extension byte.
    pub fn cyc(&mut self, cycles: u64) {
        let more = |rest: u64| u8::from(rest != 0);
        let mut rest = cycles >> 5;
        self.bytes
            .push(((cycles & 0x1f) as u8) << 3 | more(rest) << 2 | 0x03);
        while rest != 0 {
            let byte = (rest & 0x7f) as u8;
            rest >>= 7;
            self.bytes.push(byte << 1 | more(rest));
        }
    }

    pub fn cbr(&mut self, ratio: u8) {
        self.bytes.extend([0x02, 0x03, ratio, 0]);
    }

    /// MODE.Exec for 64-bit code.
    pub fn mode_64(&mut self) {
        self.bytes.extend([0x99, 0x01]);
    }
}

/// Records what a CPU tracing a known path sends: conditional branches and
/// returns to the call they came from as TNT bits, other indirect transfers
/// as TIPs. The path is given one executed instruction at a time.
pub struct Recorder<'a> {
    image: &'a Image,
    encoder: Encoder,
    tnt: Vec<bool>,
    /// Return addresses of the calls seen, for return compression.
    stack: Vec<u64>,
}

/// The path cannot have run: the instruction cannot go where it says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ip:#x}: {what}")]
pub struct BadPath {
    pub ip: u64,
    pub what: &'static str,
}

impl<'a> Recorder<'a> {
    /// A trace that starts with a PSB+ at time `tsc` and tracing enabled
    /// at `ip`.
    pub fn new(image: &'a Image, ip: u64, tsc: u64) -> Self {
        let mut encoder = Encoder::new();
        encoder.psb();
        encoder.tsc(tsc);
        encoder.mode_64();
        encoder.psbend();
        encoder.ip(IpKind::TipPge, Some(ip));
        Recorder {
            image,
            encoder,
            tnt: Vec::new(),
            stack: Vec::new(),
        }
    }

    /// The instruction at `ip` ran, and the next one is at `next`.
    pub fn step(&mut self, ip: u64, next: u64) -> Result<(), BadPath> {
        let bad = |what| BadPath { ip, what };
        let bytes = self.image.bytes_at(ip).ok_or(bad("no code here"))?;
        let bytes = &bytes[..bytes.len().min(15)];
        let instr = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode();
        if instr.is_invalid() {
            return Err(bad("not an instruction"));
        }
        let fallthrough = instr.next_ip();
        match instr.flow_control() {
            FlowControl::Next if next == fallthrough => {}
            FlowControl::ConditionalBranch
                if next == fallthrough || next == instr.near_branch_target() =>
            {
                self.bit(next != fallthrough);
            }
            FlowControl::UnconditionalBranch if next == instr.near_branch_target() => {}
            FlowControl::Call if next == instr.near_branch_target() => {
                if next != fallthrough {
                    self.push(fallthrough);
                }
            }
            FlowControl::IndirectCall if instr.mnemonic() == Mnemonic::Call => {
                self.push(fallthrough);
                self.transfer(next);
            }
            FlowControl::IndirectBranch => self.transfer(next),
            FlowControl::Return if instr.mnemonic() == Mnemonic::Ret => {
                if self.stack.pop() == Some(next) {
                    self.bit(true);
                } else {
                    self.transfer(next);
                }
            }
            _ => return Err(bad("the instruction cannot go to the next address")),
        }
        Ok(())
    }

    /// Time moves on: a TSC packet, after the outcomes so far.
    pub fn tsc(&mut self, tsc: u64) {
        self.flush();
        self.encoder.tsc(tsc);
    }

    /// Tracing stops at the branch after the last instruction given, an
    /// indirect one or a return: its TIP becomes a TIP.PGD, with the
    /// address the branch went to where `to` gives it.
    pub fn disable(&mut self, to: Option<u64>) {
        self.flush();
        self.encoder.ip(IpKind::TipPgd, to);
    }

    /// Tracing resumes at `ip` (TIP.PGE).
    pub fn enable(&mut self, ip: u64) {
        self.encoder.ip(IpKind::TipPge, Some(ip));
    }

    /// The internal buffer overflowed; tracing resumes at `ip` with a FUP.
    /// The CPU forgets its return-compression stack.
    pub fn overflow(&mut self, ip: u64) {
        self.flush();
        self.encoder.ovf();
        self.encoder.ip(IpKind::Fup, Some(ip));
        self.stack.clear();
    }

    /// A PSB+ as the CPU sends it periodically, with the current IP. The
    /// returns after it are not compressed against calls before it (a
    /// decoder may start at any PSB).
    pub fn psb(&mut self, ip: u64) {
        self.flush();
        self.stack.clear();
        self.encoder.psb();
        self.encoder.mode_64();
        self.encoder.ip(IpKind::Fup, Some(ip));
        self.encoder.psbend();
    }

    /// The trace so far, with the outcomes still held written out.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.encoder.into_bytes()
    }

    /// Bytes of trace so far.
    pub fn size(&self) -> usize {
        self.encoder.bytes().len()
    }

    fn push(&mut self, ret: u64) {
        if self.stack.len() == 64 {
            self.stack.remove(0);
        }
        self.stack.push(ret);
    }

    fn bit(&mut self, taken: bool) {
        self.tnt.push(taken);
        if self.tnt.len() == 6 {
            self.flush();
        }
    }

    fn transfer(&mut self, to: u64) {
        self.flush();
        self.encoder.ip(IpKind::Tip, Some(to));
    }

    fn flush(&mut self) {
        if !self.tnt.is_empty() {
            self.encoder.tnt(&self.tnt);
            self.tnt.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Packet, Packets};

    #[test]
    fn every_packet_written_reads_back_the_same() {
        let mut enc = Encoder::new();
        enc.psb();
        enc.mode_64();
        enc.psbend();
        enc.tnt(&[true, false, true]);
        enc.tnt(&[false; 6]);
        enc.ip(IpKind::TipPge, Some(0x7f00_1234_5678));
        enc.ip(IpKind::Tip, Some(0x7f00_1234_9abc));
        enc.ip(IpKind::Fup, Some(0x7f00_9999_0000));
        enc.ip(IpKind::Tip, Some(0xffff_8000_0000_1000));
        enc.ip(IpKind::TipPgd, None);
        enc.tsc(0x12_3456_789a);
        enc.tma(0xf012, 0x1ab);
        enc.mtc(0xc4);
        enc.cyc(0x1f);
        enc.cyc(0x20);
        enc.cyc(0x1234_5678);
        enc.cbr(0x2a);
        enc.ovf();
        enc.pad();
        let mut got = Vec::new();
        let mut last_ip = 0;
        let mut packets = Packets::new(enc.bytes());
        while let Some(next) = packets.next_packet() {
            let (_, packet) = next.unwrap();
            got.push(match packet {
                Packet::Ip { kind, ip } => {
                    let ip = ip.resolve(last_ip);
                    last_ip = ip.unwrap_or(last_ip);
                    format!("{kind:?} {ip:x?}")
                }
                other => format!("{other:?}"),
            });
        }
        let want = [
            "Psb",
            "ModeExec { cs_l: true, cs_d: false, interrupts: false }",
            "PsbEnd",
            "Tnt { bits: 5, count: 3, long: false }",
            "Tnt { bits: 0, count: 6, long: false }",
            "TipPge Some(7f0012345678)",
            "Tip Some(7f0012349abc)",
            "Fup Some(7f0099990000)",
            "Tip Some(ffff800000001000)",
            "TipPgd None",
            "Tsc(78187493530)",
            "Tma { ctc: 61458, fast: 427 }",
            "Mtc(196)",
            "Cyc(31)",
            "Cyc(32)",
            "Cyc(305419896)",
            "Cbr(42)",
            "Ovf",
            "Pad",
        ];
        assert_eq!(got, want);
    }
}
