//! Kernel memory for `*address` in the probes weft runs itself (BEGIN,
//! END, intervals): read from `/proc/kcore`, the kernel's memory as an ELF
//! core file, whose loadable segments map kernel addresses to offsets.

use std::{fs::File, os::unix::fs::FileExt as _};

const PATH: &str = "/proc/kcore";
const PT_LOAD: u32 = 1;

/// `/proc/kcore`, opened on the first read.
#[derive(Default)]
pub struct Kcore {
    opened: Option<Result<Opened, String>>,
}

struct Opened {
    file: File,
    /// `(address, size, offset)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl Kcore {
    /// Whether reading failed, and why: said once.
    fn opened(&mut self) -> Option<&Opened> {
        let opened = self.opened.get_or_insert_with(|| {
            Opened::open().inspect_err(|why| log::warn!("weft: {PATH}: {why}"))
        });
        opened.as_ref().ok()
    }
}

impl weft_oneliner::KernelMemory for Kcore {
    fn word(&mut self, address: u64) -> Option<u64> {
        let opened = self.opened()?;
        let (start, _, offset) = opened
            .segments
            .iter()
            .find(|(start, size, _)| (*start..start.saturating_add(*size)).contains(&address))?;
        let mut bytes = [0; 8];
        opened
            .file
            .read_exact_at(&mut bytes, offset + (address - start))
            .ok()?;
        Some(u64::from_le_bytes(bytes))
    }
}

impl Opened {
    fn open() -> Result<Self, String> {
        let file = File::open(PATH).map_err(|e| e.to_string())?;
        let mut header = [0; 64];
        file.read_exact_at(&mut header, 0)
            .map_err(|e| e.to_string())?;
        if &header[..4] != b"\x7fELF" || header[4] != 2 {
            return Err("not a 64-bit ELF core".into());
        }
        let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
        let phoff = u64::from_le_bytes(header[32..40].try_into().expect("8 bytes"));
        let (entry, count) = (usize::from(u16_at(54)), usize::from(u16_at(56)));
        let mut table = vec![0; entry * count];
        file.read_exact_at(&mut table, phoff)
            .map_err(|e| e.to_string())?;
        let word =
            |p: &[u8], at: usize| u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
        let segments = table
            .chunks_exact(entry.max(1))
            .filter(|p| {
                entry >= 56 && u32::from_le_bytes(p[..4].try_into().expect("4 bytes")) == PT_LOAD
            })
            // p_offset, p_vaddr, p_filesz.
            .map(|p| (word(p, 16), word(p, 32), word(p, 8)))
            .collect();
        Ok(Self { file, segments })
    }
}
