//! The memory image the flow decoder walks: code bytes at the addresses they
//! ran at. Raw binaries are placed at a given address; ELF files at the
//! addresses of their loadable segments.

use std::path::Path;

/// Program header type of a loadable segment.
const PT_LOAD: u64 = 1;

/// Code bytes by address; later segments hide earlier ones where they
/// overlap, as a later mapping would.
#[derive(Debug, Default, Clone)]
pub struct Image {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
struct Segment {
    addr: u64,
    bytes: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not an ELF file and no load address given (write FILE:ADDR for a raw binary)")]
    NotElf { path: String },
    #[error("{path}: offset {offset:#x}: {what}")]
    BadElf {
        path: String,
        offset: u64,
        what: &'static str,
    },
    #[error("{spec:?}: the load address is not a hex number")]
    BadAddress { spec: String },
}

impl Image {
    pub fn new() -> Self {
        Image::default()
    }

    /// Map `bytes` at `addr`.
    pub fn add(&mut self, addr: u64, bytes: Vec<u8>) {
        self.segments.push(Segment { addr, bytes });
    }

    /// Add a file as `weft pt flow --image` names it: `FILE:ADDR` maps a raw
    /// binary at hex `ADDR`; a plain `FILE` must be an ELF file.
    pub fn add_spec(&mut self, spec: &str) -> Result<(), ImageError> {
        if let Some((path, addr)) = spec.rsplit_once(':') {
            let digits = addr.trim_start_matches("0x");
            let addr = u64::from_str_radix(digits, 16)
                .map_err(|_| ImageError::BadAddress { spec: spec.into() })?;
            let bytes = read(Path::new(path))?;
            self.add(addr, bytes);
            return Ok(());
        }
        let bytes = read(Path::new(spec))?;
        self.add_elf(spec, &bytes)
    }

    /// Map the loadable segments of a 64-bit little-endian ELF file.
    pub fn add_elf(&mut self, path: &str, file: &[u8]) -> Result<(), ImageError> {
        if file.get(..4) != Some(b"\x7fELF") {
            return Err(ImageError::NotElf { path: path.into() });
        }
        let bad = |offset: u64, what| ImageError::BadElf {
            path: path.into(),
            offset,
            what,
        };
        if file.get(4) != Some(&2) || file.get(5) != Some(&1) {
            return Err(bad(4, "only 64-bit little-endian ELF files are supported"));
        }
        let phoff = field(file, 0x20, 8).ok_or_else(|| bad(0x20, "truncated header"))?;
        let phentsize = field(file, 0x36, 2).ok_or_else(|| bad(0x36, "truncated header"))?;
        let phnum = field(file, 0x38, 2).ok_or_else(|| bad(0x38, "truncated header"))?;
        for i in 0..phnum {
            let at = phoff + i * phentsize;
            let header = |off: u64, n| {
                field(file, at + off, n).ok_or_else(|| bad(at, "truncated program header"))
            };
            if header(0, 4)? != PT_LOAD {
                continue;
            }
            let (offset, vaddr, filesz) = (header(8, 8)?, header(16, 8)?, header(32, 8)?);
            let end = offset
                .checked_add(filesz)
                .filter(|&e| e <= file.len() as u64);
            let end = end.ok_or_else(|| bad(at, "segment lies outside the file"))?;
            self.add(vaddr, file[offset as usize..end as usize].to_vec());
        }
        Ok(())
    }

    /// The bytes from `ip` to the end of the segment holding it.
    pub fn bytes_at(&self, ip: u64) -> Option<&[u8]> {
        self.segments.iter().rev().find_map(|s| {
            let off = ip.checked_sub(s.addr)?;
            s.bytes.get(off as usize..).filter(|rest| !rest.is_empty())
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ImageError> {
    std::fs::read(path).map_err(|source| ImageError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// A little-endian field of `n` bytes at `at`.
fn field(file: &[u8], at: u64, n: usize) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    file.get(at..at.checked_add(n)?).map(crate::packet::le)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_segments_hide_earlier_ones() {
        let mut image = Image::new();
        image.add(0x1000, vec![1, 2, 3, 4]);
        image.add(0x1002, vec![9]);
        assert_eq!(image.bytes_at(0x1000), Some(&[1, 2, 3, 4][..]));
        assert_eq!(image.bytes_at(0x1002), Some(&[9][..]));
        assert_eq!(image.bytes_at(0x1003), Some(&[4][..]));
        assert_eq!(image.bytes_at(0x1004), None);
        assert_eq!(image.bytes_at(0xfff), None);
    }

    #[test]
    fn a_non_elf_file_without_address_is_refused() {
        let err = Image::new().add_elf("x.bin", b"\x90\x90").unwrap_err();
        assert!(err.to_string().contains("FILE:ADDR"), "{err}");
    }
}
