//! What the walk needs to know about one instruction: its length, how it
//! moves the IP (and so which packet decides where it goes), and whether it
//! is a PTWRITE, decoded with iced-x86 and cached by address.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register,
};

/// What an instruction does to the call stack, for call traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A near call (not `call next`, which only reads the IP).
    Call,
    /// A near return.
    Return,
    Other,
}

/// Decoded instructions by address.
pub(crate) type Cache = HashMap<u64, Insn, BuildHasherDefault<IpHasher>>;

/// What the walk needs to know about one instruction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Insn {
    pub(crate) len: u8,
    pub(crate) kind: Kind,
    /// A PTWRITE: where a PTW packet's event belongs.
    pub(crate) ptwrite: bool,
}

impl Insn {
    /// The instruction `bytes` begin with, at `ip` in `bits`-bit code;
    /// `None` where they hold none.
    pub(crate) fn decode(bits: u32, bytes: &[u8], ip: u64) -> Option<Insn> {
        if let Some(len) = jmpabs(bits, bytes) {
            return Some(Insn {
                len,
                kind: Kind::Indirect,
                ptwrite: false,
            });
        }
        let instr = Decoder::with_ip(bits, bytes, ip, DecoderOptions::NONE).decode();
        (!instr.is_invalid()).then(|| Insn {
            len: instr.len() as u8,
            kind: classify(&instr),
            ptwrite: instr.mnemonic() == Mnemonic::Ptwrite,
        })
    }

    pub(crate) fn class(self, ip: u64) -> Class {
        match self.kind {
            Kind::Call(target) if target != ip.wrapping_add(u64::from(self.len)) => Class::Call,
            Kind::IndirectCall => Class::Call,
            Kind::Ret => Class::Return,
            _ => Class::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Next,
    Cond(u64),
    Jump(u64),
    Call(u64),
    /// Needs a TIP: indirect jumps, far transfers.
    Indirect,
    IndirectCall,
    Ret,
    MovCr3,
    /// VMLAUNCH, VMRESUME: a far transfer (for erratum SKD022).
    VmEntry,
}

/// Hashes instruction addresses with one multiplication: the cache is
/// looked up at every instruction, and addresses need no defence against
/// collisions chosen by an attacker (a trace can only slow its own decode).
#[derive(Default)]
pub(crate) struct IpHasher(u64);

impl Hasher for IpHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, ip: u64) {
        self.0 = (self.0 ^ ip).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn classify(instr: &Instruction) -> Kind {
    let far = matches!(instr.op0_kind(), OpKind::FarBranch16 | OpKind::FarBranch32);
    if matches!(instr.mnemonic(), Mnemonic::Vmlaunch | Mnemonic::Vmresume) {
        return Kind::VmEntry;
    }
    match instr.flow_control() {
        FlowControl::ConditionalBranch => Kind::Cond(instr.near_branch_target()),
        FlowControl::UnconditionalBranch if !far => Kind::Jump(instr.near_branch_target()),
        FlowControl::Call if !far && instr.mnemonic() == Mnemonic::Call => {
            Kind::Call(instr.near_branch_target())
        }
        FlowControl::IndirectCall
            if instr.mnemonic() == Mnemonic::Call && !is_far_indirect(instr) =>
        {
            Kind::IndirectCall
        }
        FlowControl::Return if instr.mnemonic() == Mnemonic::Ret => Kind::Ret,
        FlowControl::UnconditionalBranch
        | FlowControl::IndirectBranch
        | FlowControl::Call
        | FlowControl::IndirectCall
        | FlowControl::Return
        | FlowControl::Interrupt => Kind::Indirect,
        FlowControl::Next if is_mov_cr3(instr) => Kind::MovCr3,
        _ => Kind::Next,
    }
}

/// The length of an APX `JMPABS` at the start of `bytes` (64-bit code
/// only): the REX2 prefix `d5` with map 0 and W clear, opcode `a1`, and a
/// 64-bit absolute target, 11 bytes in all. iced-x86 does not decode APX.
/// Though its target is in the instruction, the trace reports it like an
/// indirect jump, with a TIP (libipt: "JMPABS is direct but receives a
/// TIP"; its test `tip-jmpabs`), so the walk takes the TIP's target.
fn jmpabs(bits: u32, bytes: &[u8]) -> Option<u8> {
    match bytes {
        [0xd5, rex2, 0xa1, ..] if bits == 64 && rex2 & 0x88 == 0 && bytes.len() >= 11 => Some(11),
        _ => None,
    }
}

/// `call far [mem]`: a far transfer, which pushes nothing we can compress.
fn is_far_indirect(instr: &Instruction) -> bool {
    matches!(
        instr.code(),
        Code::Call_m1616 | Code::Call_m1632 | Code::Call_m1664
    )
}

fn is_mov_cr3(instr: &Instruction) -> bool {
    matches!(instr.code(), Code::Mov_cr_r32 | Code::Mov_cr_r64)
        && instr.op0_register() == Register::CR3
}
