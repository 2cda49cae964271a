//! Intel Processor Trace for weft.
//!
//! Layered like the decoders it is measured against: [`packet`] turns bytes
//! into packets, [`dump`] lists them as libipt's ptdump does; under the
//! instruction walk, a query layer (`query.rs`, libipt's query decoder)
//! reads the packets, keeps the last IP and the time, and answers what comes
//! next; [`flow`] walks the code of an [`image::Image`] (each instruction
//! decoded with iced-x86 in `insn.rs`) and asks it which way each branch
//! went ([`ptxed`] spells the steps as ptxed does); [`pevent`] and
//! [`sideband`] read `perf_event` sideband and switch the image per process;
//! [`threads`] hands each step of a CPU's trace to the thread that ran it,
//! and [`calls`] turns steps into calls; [`perf_data`] reads perf.data.
//! This crate knows nothing about eBPF or the store and makes no system
//! call: it reads PT byte streams and code images and says what the CPU did.
//! Whether a machine can record PT, and the recording, are
//! `weft-pt-capture`'s.

mod binding;
pub mod calls;
pub mod control;
pub mod dump;
pub mod encode;
mod event;
pub mod flow;
pub mod image;
mod insn;
pub mod packet;
pub mod perf_data;
pub mod pevent;
pub mod ptxed;
mod query;
pub mod sideband;
pub mod threads;
pub mod time;

use packet::Fault;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A packet could not be decoded; `offset` is where it starts.
    #[error("{offset:x}: error decoding packet: {}", fault.message())]
    Decode { offset: u64, fault: Fault },
}

/// The CPU a trace was recorded on, as `family/model[/stepping]`: decoders
/// need it for errata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    pub family: u16,
    pub model: u8,
    pub stepping: Option<u8>,
}

impl std::str::FromStr for Cpu {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad =
            || format!("{text:?} is not a CPU as FAMILY/MODEL[/STEPPING] (decimal, e.g. 6/85)");
        let mut parts = text.split('/').map(str::parse::<u16>);
        let (Some(Ok(family)), Some(Ok(model))) = (parts.next(), parts.next()) else {
            return Err(bad());
        };
        let stepping = match parts.next() {
            None => None,
            Some(Ok(s)) => Some(u8::try_from(s).map_err(|_| bad())?),
            Some(Err(_)) => return Err(bad()),
        };
        let model = u8::try_from(model).map_err(|_| bad())?;
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Cpu {
            family,
            model,
            stepping,
        })
    }
}

/// CPUs with errata BDM70 and SKD022 (Skylake and later).
const SKYLAKE_ON: &[(u16, u8)] = &[
    (6, 78),
    (6, 85),
    (6, 94),
    (6, 102),
    (6, 106),
    (6, 108),
    (6, 125),
    (6, 126),
    (6, 140),
    (6, 141),
    (6, 142),
    (6, 143),
    (6, 151),
    (6, 154),
    (6, 158),
    (6, 165),
    (6, 166),
    (6, 167),
    (6, 168),
    (6, 170),
    (6, 172),
    (6, 173),
    (6, 174),
    (6, 181),
    (6, 183),
    (6, 186),
    (6, 189),
    (6, 191),
    (6, 197),
    (6, 198),
    (6, 204),
    (6, 207),
    (6, 213),
    (18, 1),
    (18, 3),
    (19, 1),
];
/// Skylake client cores and their successors (SKD010, SKL168).
const SKYLAKE_CLIENT: &[(u16, u8)] = &[(6, 78), (6, 94), (6, 142), (6, 158), (6, 165), (6, 166)];

/// SKL014 (and its namesakes on later cores).
const SKL014: &[(u16, u8)] = &[
    (6, 78),
    (6, 85),
    (6, 94),
    (6, 102),
    (6, 106),
    (6, 108),
    (6, 125),
    (6, 126),
    (6, 140),
    (6, 141),
    (6, 142),
    (6, 158),
    (6, 165),
    (6, 166),
    (6, 167),
    (6, 168),
];

/// Broadwell, with erratum BDM70 too.
const BROADWELL: &[(u16, u8)] = &[(6, 61), (6, 71), (6, 79), (6, 86)];

/// Processor errata that change how a trace must be read (Intel's
/// specification updates; the CPU lists are those libipt's tests name).
#[allow(clippy::struct_excessive_bools, reason = "one flag per erratum")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errata {
    /// SKZ84: corrupted TMA packets followed by a bogus byte (VMX guests
    /// with TSC offsetting or scaling).
    pub skz84: bool,
    /// APL11: an OVF may be followed by a TIP.PGD that means nothing.
    pub apl11: bool,
    /// BDM70: a PSB+ while tracing is off may carry a FUP; a TIP.PGE
    /// follows and is where tracing really resumes.
    pub bdm70: bool,
    /// SKD007: an OVF may be issued after the first byte of a multi-byte
    /// CYC, instead of its remaining bytes.
    pub skd007: bool,
    /// SKD010: an OVF may be followed by a TIP instead of a FUP.
    pub skd010: bool,
    /// SKD022: VMLAUNCH and VMRESUME that disable tracing send a FUP of
    /// their own address before the TIP.PGD.
    pub skd022: bool,
    /// SKL168: CYC packets just before a PSB may be dropped, so the first
    /// MTC after it may not calibrate time.
    pub skl168: bool,
    /// BDM64: the FUP of a TSX abort right after a traced branch may name
    /// where that branch went rather than where the abort hit.
    pub bdm64: bool,
    /// APL12: after an OVF, a FUP followed by a TIP.PGE (with VMCS, PIP or
    /// MODE.Exec between) means nothing; tracing resumes at the TIP.PGE.
    pub apl12: bool,
    /// SKL014: a direct call or jump out of the traced address range sends
    /// its TIP.PGD without the IP it went to.
    pub skl014: bool,
}

impl Errata {
    pub fn for_cpu(cpu: Cpu) -> Self {
        let is = |list: &[(u16, u8)]| list.contains(&(cpu.family, cpu.model));
        Errata {
            skz84: is(&[
                (6, 85),
                (6, 106),
                (6, 108),
                (6, 143),
                (6, 173),
                (6, 174),
                (6, 207),
                (19, 1),
            ]),
            apl11: is(&[
                (6, 92),
                (6, 95),
                (6, 122),
                (6, 134),
                (6, 150),
                (6, 151),
                (6, 154),
                (6, 156),
                (6, 170),
                (6, 172),
                (6, 175),
                (6, 181),
                (6, 182),
                (6, 183),
                (6, 186),
                (6, 189),
                (6, 191),
                (6, 197),
                (6, 198),
                (6, 204),
                (6, 213),
                (6, 221),
                (18, 1),
                (18, 3),
            ]),
            bdm70: is(BROADWELL) || is(SKYLAKE_ON),
            skd007: is(SKYLAKE_CLIENT),
            skd010: is(SKYLAKE_CLIENT),
            skl168: is(SKYLAKE_CLIENT),
            apl12: is(&[(6, 92), (6, 95)]),
            bdm64: is(BROADWELL),
            skd022: is(SKYLAKE_ON),
            skl014: is(SKL014),
        }
    }
}
