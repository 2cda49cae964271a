//! Event tracing: a CFE packet names a control-flow event (interrupt,
//! return from one, SMI, VM exit or entry, ...), EVD packets before it
//! carry its data (the faulting address, the VM-exit qualification and
//! reason). This module turns them into events and says where in the flow
//! each belongs; `flow/` places them.

/// A control-flow event, printed as ptxed prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Interrupt {
        vector: u8,
        cr2: Option<u64>,
    },
    Iret,
    Smi,
    Rsm,
    Sipi {
        vector: u8,
    },
    Init,
    VmEntry,
    VmExit {
        vector: Option<u8>,
        vmxr: Option<u64>,
        vmxq: Option<u64>,
    },
    Shutdown,
    Uintr {
        vector: u8,
    },
    Uiret,
    Swintr {
        vector: u8,
    },
    Syscall,
}

/// Where an event belongs in the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Where it stands (tracing is off, or nothing follows to bind to).
    Now,
    /// At the next FUP's address, before that instruction: it interrupts
    /// the flow there (the FUP and what follows it are the branch).
    BeforeFup,
    /// With the branch of the instruction at the next FUP's address,
    /// which caused it (an IRET at its own address).
    AfterFupInsn,
    /// With the next branch the flow takes: its instruction caused it.
    AfterInsn,
}

/// EVD packets waiting for their CFE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Data {
    cr2: Option<u64>,
    vmxq: Option<u64>,
    vmxr: Option<u64>,
}

/// The packets do not go together (libipt: "unexpected packet context").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch;

impl Data {
    /// Add an EVD: CR2 goes with an interrupt, VMXQ and VMXR with a VM
    /// exit, each at most once.
    pub fn add(&mut self, kind: u8, payload: u64) -> Result<(), Mismatch> {
        let vmx = self.vmxq.is_some() || self.vmxr.is_some();
        let slot = match kind {
            0 if !vmx => &mut self.cr2,
            1 if self.cr2.is_none() => &mut self.vmxq,
            2 if self.cr2.is_none() => &mut self.vmxr,
            // Unknown kinds carry nothing weft uses.
            3.. => return Ok(()),
            _ => return Err(Mismatch),
        };
        if slot.is_some() {
            return Err(Mismatch);
        }
        *slot = Some(payload);
        Ok(())
    }

    fn is_empty(&self) -> bool {
        *self == Data::default()
    }
}

/// The event of a CFE of `kind` with the data before it, and where it
/// goes. `ip`: the CFE says a FUP names where it happened; `enabled`:
/// tracing is on. `None` for kinds weft does not know (skipped, as
/// libipt does).
pub fn event(
    kind: u8,
    vector: u8,
    ip: bool,
    enabled: bool,
    data: Data,
) -> Result<Option<(Control, Place)>, Mismatch> {
    let needs_no_data = |event| {
        if data.is_empty() {
            Ok(event)
        } else {
            Err(Mismatch)
        }
    };
    let event = match kind {
        1 if data.vmxq.is_none() && data.vmxr.is_none() => Control::Interrupt {
            vector,
            cr2: data.cr2,
        },
        8 | 9 if data.cr2.is_none() => Control::VmExit {
            vector: (kind == 9).then_some(vector),
            vmxr: data.vmxr,
            vmxq: data.vmxq,
        },
        2 => needs_no_data(Control::Iret)?,
        3 => needs_no_data(Control::Smi)?,
        4 if !ip => needs_no_data(Control::Rsm)?,
        5 if !ip => needs_no_data(Control::Sipi { vector })?,
        // Data of the other kind, or an RSM or SIPI that names an IP.
        1 | 4 | 5 | 8 | 9 => return Err(Mismatch),
        6 => needs_no_data(Control::Init)?,
        7 => needs_no_data(Control::VmEntry)?,
        10 => needs_no_data(Control::Shutdown)?,
        12 => needs_no_data(Control::Uintr { vector })?,
        13 => needs_no_data(Control::Uiret)?,
        14 => needs_no_data(Control::Swintr { vector })?,
        15 => needs_no_data(Control::Syscall)?,
        _ => return Ok(None),
    };
    // Returns and entries are caused by the instruction; the rest
    // interrupt the flow.
    let caused = matches!(
        event,
        Control::Iret | Control::VmEntry | Control::Shutdown | Control::Uiret | Control::Syscall
    );
    let place = match (ip, enabled, caused) {
        (true, _, true) => Place::AfterFupInsn,
        (true, _, false) | (false, true, false) => Place::BeforeFup,
        (false, true, true) => Place::AfterInsn,
        (false, false, _) => Place::Now,
    };
    Ok(Some((event, place)))
}

impl std::fmt::Display for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |f: &mut std::fmt::Formatter<'_>, name: &str, value: Option<u64>| match value {
            Some(value) => write!(f, ", {name}: {value:016x}"),
            None => Ok(()),
        };
        match self {
            Control::Interrupt { vector, cr2 } => {
                write!(f, "interrupt {vector}")?;
                hex(f, "cr2", *cr2)
            }
            Control::Iret => write!(f, "iret"),
            Control::Smi => write!(f, "smi"),
            Control::Rsm => write!(f, "rsm"),
            Control::Sipi { vector } => write!(f, "sipi: {vector:x}"),
            Control::Init => write!(f, "init"),
            Control::VmEntry => write!(f, "vmentry"),
            Control::VmExit { vector, vmxr, vmxq } => {
                write!(f, "vmexit")?;
                if let Some(vector) = vector {
                    write!(f, ", intr: {vector}")?;
                }
                hex(f, "vmxr", *vmxr)?;
                hex(f, "vmxq", *vmxq)
            }
            Control::Shutdown => write!(f, "shutdown"),
            Control::Uintr { vector } => write!(f, "uintr {vector}"),
            Control::Uiret => write!(f, "uiret"),
            Control::Swintr { vector } => write!(f, "swintr {vector}"),
            Control::Syscall => write!(f, "syscall"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_data_goes_with_its_own_kind_of_event_once() {
        let mut data = Data::default();
        data.add(0, 0xf00).unwrap();
        assert_eq!(data.add(0, 0xf01), Err(Mismatch));
        assert_eq!(data.add(1, 0), Err(Mismatch));
        let (interrupt, place) = event(1, 14, false, true, data).unwrap().unwrap();
        assert_eq!(interrupt.to_string(), "interrupt 14, cr2: 0000000000000f00");
        assert_eq!(place, Place::BeforeFup);
        assert_eq!(event(2, 0, false, true, data), Err(Mismatch));
        let mut vmx = Data::default();
        vmx.add(2, 10).unwrap();
        vmx.add(1, 0xbaa).unwrap();
        let (exit, _) = event(9, 14, true, true, vmx).unwrap().unwrap();
        assert_eq!(
            exit.to_string(),
            "vmexit, intr: 14, vmxr: 000000000000000a, vmxq: 0000000000000baa"
        );
    }

    #[test]
    fn returns_go_with_their_branch_and_interrupts_before_their_fup() {
        let place = |kind, ip, enabled| {
            event(kind, 0, ip, enabled, Data::default())
                .unwrap()
                .unwrap()
                .1
        };
        assert_eq!(place(2, true, true), Place::AfterFupInsn);
        assert_eq!(place(2, false, true), Place::AfterInsn);
        assert_eq!(place(2, false, false), Place::Now);
        assert_eq!(place(3, false, true), Place::BeforeFup);
        assert_eq!(place(4, false, false), Place::Now);
        assert_eq!(event(4, 0, true, true, Data::default()), Err(Mismatch));
        assert_eq!(event(11, 0, true, true, Data::default()), Ok(None));
    }
}
