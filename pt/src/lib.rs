//! Intel Processor Trace for weft.
//!
//! Layered like the decoders it is measured against: [`packet`] turns bytes
//! into packets, [`dump`] lists them as libipt's ptdump does. This crate
//! knows nothing about eBPF or the store; it reads PT byte streams and code
//! images and says what the CPU did.

pub mod dump;
pub mod packet;

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

/// Processor errata that change how a trace must be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errata {
    /// SKZ84: corrupted TMA packets followed by a bogus byte (VMX guests
    /// with TSC offsetting or scaling).
    pub skz84: bool,
}

impl Errata {
    pub fn for_cpu(cpu: Cpu) -> Self {
        let skz84 = matches!(
            (cpu.family, cpu.model),
            (6, 85 | 106 | 108 | 143 | 173 | 174 | 207) | (19, 1)
        );
        Errata { skz84 }
    }
}
