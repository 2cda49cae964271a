//! USDT probes (the SDT notes of `SystemTap`): the `.note.stapsdt` notes a program
//! or library carries for each static probe site, as `bpftrace -l
//! 'usdt:PATH:*'` lists them.

use object::{Object as _, ObjectSection as _, read::elf::SectionHeader as _};

use crate::elf::{Elf, Error};

/// `NT_STAPSDT`, the note type of a probe site.
const NT_STAPSDT: u32 = 3;

/// One probe site: where a uprobe goes, and how its arguments are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtProbe {
    pub provider: String,
    pub name: String,
    /// The site's offset in the file (what a uprobe attaches at).
    pub offset: u64,
    /// The offset in the file of the probe's semaphore, the counter its
    /// program tests before it evaluates the arguments; 0 for none.
    pub semaphore: u64,
    /// The arguments as the assembler wrote them: `-4@%eax 8@-8(%rbp)`.
    pub args: String,
}

impl Elf<'_> {
    /// The file's USDT probe sites, in the order of its notes.
    pub fn usdt_probes(&self) -> Result<Vec<UsdtProbe>, Error> {
        let object::File::Elf64(elf) = &self.file else {
            return Ok(Vec::new());
        };
        let endian = elf.endian();
        // Sites are link-time addresses; in a prelinked file they moved by
        // as much as `.stapsdt.base` moved from where the notes say it is.
        let base = elf.section_by_name(".stapsdt.base").map(|s| s.address());
        let segments = self.segments();
        let to_file = |addr: u64, what: &str| {
            segments
                .iter()
                .find_map(|s| s.file_offset(addr))
                .ok_or_else(|| {
                    self.error(format!("USDT {what} {addr:#x} is in no loadable segment"))
                })
        };
        let mut probes = Vec::new();
        for section in elf.elf_section_table().iter() {
            let notes = section
                .notes(endian, self.data)
                .map_err(|e| self.error(e))?;
            let Some(mut notes) = notes else { continue };
            while let Some(note) = notes.next().map_err(|e| self.error(e))? {
                if note.name() != b"stapsdt" || note.n_type(endian) != NT_STAPSDT {
                    continue;
                }
                let site = Site::read(note.desc()).map_err(|e| self.error(e))?;
                let pc = match base {
                    Some(base) if site.base != 0 => {
                        site.pc.wrapping_add(base.wrapping_sub(site.base))
                    }
                    _ => site.pc,
                };
                probes.push(UsdtProbe {
                    offset: to_file(pc, "site")?,
                    semaphore: match site.semaphore {
                        0 => 0,
                        address => to_file(address, "semaphore")?,
                    },
                    provider: site.provider,
                    name: site.name,
                    args: site.args,
                });
            }
        }
        Ok(probes)
    }
}

/// A `stapsdt` note's description: three 8-byte addresses, then three
/// NUL-ended strings.
struct Site {
    pc: u64,
    base: u64,
    semaphore: u64,
    provider: String,
    name: String,
    args: String,
}

impl Site {
    fn read(desc: &[u8]) -> Result<Self, String> {
        let bad = || format!("a stapsdt note of {} bytes is malformed", desc.len());
        let word = |i: usize| -> Result<u64, String> {
            let bytes = desc.get(i * 8..i * 8 + 8).ok_or_else(bad)?;
            Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
        };
        let (pc, base, semaphore) = (word(0)?, word(1)?, word(2)?);
        let mut strings = desc[24..]
            .split(|b| *b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned());
        let mut next = || strings.next().ok_or_else(bad);
        let (provider, name, args) = (next()?, next()?, next()?);
        if provider.is_empty() || name.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            pc,
            base,
            semaphore,
            provider,
            name,
            args,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_reads_its_addresses_and_strings() {
        let mut desc = Vec::new();
        for word in [0x004f_20a1_u64, 0x008c_c5a0, 0x00a8_4260] {
            desc.extend(word.to_le_bytes());
        }
        desc.extend(b"python\0function__entry\08@%rbp 8@%r12 -4@%eax\0");
        let site = Site::read(&desc).unwrap();
        assert_eq!(
            (site.pc, site.base, site.semaphore),
            (0x004f_20a1, 0x008c_c5a0, 0x00a8_4260)
        );
        assert_eq!(
            (
                site.provider.as_str(),
                site.name.as_str(),
                site.args.as_str()
            ),
            ("python", "function__entry", "8@%rbp 8@%r12 -4@%eax")
        );
        assert!(
            Site::read(&desc[..20]).is_err(),
            "shorter than its addresses"
        );
        assert!(Site::read(&desc[..24]).is_err(), "no strings");
    }
}
