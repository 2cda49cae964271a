//! The memory image the flow decoder walks: code bytes at the addresses they
//! ran at. Raw binaries are placed at a given address; ELF files at the
//! addresses of their loadable segments.

use std::path::Path;

use weft_symbols::{Elf, Finder, Symbol, Symbols};
pub use weft_symbols::{Mapping, executable_mappings};

/// Code bytes by address; later segments hide earlier ones where they
/// overlap, as a later mapping would.
#[derive(Debug, Default, Clone)]
pub struct Image {
    segments: Vec<Segment>,
    /// Function symbols of the ELF files, at the addresses they run at.
    symbols: Symbols,
    /// Where names come from: symbol tables, debug files, demangling.
    finder: Finder,
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
    #[error(transparent)]
    BadElf(weft_symbols::Error),
    #[error("{spec:?}: the load address is not a hex number")]
    BadAddress { spec: String },
    #[error("maps line {line}: {text:?} is not a mapping")]
    BadMaps { line: usize, text: String },
}

impl From<weft_symbols::Error> for ImageError {
    fn from(error: weft_symbols::Error) -> Self {
        match error {
            weft_symbols::Error::NotElf { path } => ImageError::NotElf { path },
            weft_symbols::Error::BadMaps { line, text } => ImageError::BadMaps { line, text },
            error @ weft_symbols::Error::BadElf { .. } => ImageError::BadElf(error),
        }
    }
}

impl Image {
    pub fn new() -> Self {
        Image::default()
    }

    /// An image whose functions are named by `finder` (debug directories,
    /// demangling).
    pub fn with_finder(finder: Finder) -> Self {
        Image {
            finder,
            ..Image::default()
        }
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

    /// Map the loadable segments of an ELF file, and learn its function
    /// symbols (its own, or its debug file's, and its dynamic ones).
    pub fn add_elf(&mut self, path: &str, file: &[u8]) -> Result<(), ImageError> {
        let elf = Elf::parse(path, file)?;
        for segment in elf.segments() {
            let bytes = elf.bytes(&segment)?;
            self.add(segment.vaddr, bytes.to_vec());
        }
        self.symbols
            .extend(self.finder.functions(Path::new(path), &elf));
        Ok(())
    }

    /// Map `len` bytes of `file` from `offset` at `start`, as a process maps
    /// part of a file, with the ELF function symbols that fall inside (at
    /// the addresses they have there, however the file was relocated).
    pub fn add_mapping(
        &mut self,
        path: &str,
        file: &[u8],
        start: u64,
        len: u64,
        offset: u64,
    ) -> Result<(), ImageError> {
        let end = offset.saturating_add(len).min(file.len() as u64);
        if offset < end {
            self.add(start, file[offset as usize..end as usize].to_vec());
        }
        if !file.starts_with(b"\x7fELF") {
            return Ok(());
        }
        let elf = Elf::parse(path, file)?;
        let mapping = Mapping {
            path: path.into(),
            start,
            len,
            offset,
        };
        let functions = self
            .finder
            .mapped_functions(Path::new(path), &elf, &mapping);
        self.symbols.extend(functions);
        Ok(())
    }

    /// Map the executable file mappings of a process, as `/proc/PID/maps`
    /// lists them, reading each file with `read`. Files that cannot be
    /// read are skipped and returned, with why.
    pub fn add_maps(
        &mut self,
        maps: &str,
        read: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Vec<ImageError>, ImageError> {
        self.add_mappings(executable_mappings(maps)?, read)
    }

    /// Map file `mappings`, reading each file once with `read`. Files that
    /// cannot be read are skipped and returned, with why.
    pub fn add_mappings(
        &mut self,
        mappings: impl IntoIterator<Item = Mapping>,
        read: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Vec<ImageError>, ImageError> {
        // Each file once; None where it could not be read (and was said).
        let mut files: std::collections::HashMap<String, Option<Vec<u8>>> =
            std::collections::HashMap::new();
        let mut skipped = Vec::new();
        for mapping in mappings {
            let file = files.entry(mapping.path.clone()).or_insert_with(|| {
                match read(Path::new(&mapping.path)) {
                    Ok(bytes) => Some(bytes),
                    Err(source) => {
                        skipped.push(ImageError::Read {
                            path: mapping.path.clone(),
                            source,
                        });
                        None
                    }
                }
            });
            if let Some(file) = file {
                self.add_mapping(
                    &mapping.path,
                    file,
                    mapping.start,
                    mapping.len,
                    mapping.offset,
                )?;
            }
        }
        Ok(skipped)
    }

    /// Name the function at `addr` (`size` 0: it reaches the next one).
    pub fn add_symbol(&mut self, addr: u64, size: u64, name: &str) {
        self.symbols.extend([Symbol {
            addr,
            size,
            name: name.into(),
        }]);
    }

    /// The function holding `ip`, and how far into it `ip` is. A symbol
    /// without a size is taken to reach the next one.
    pub fn symbol(&self, ip: u64) -> Option<(&str, u64)> {
        self.symbols.at(ip)
    }

    /// The bytes from `ip` to the end of the segment holding it.
    /// The bytes an instruction at `ip` may span (up to [`MAX_INSN`]),
    /// read on across the end of a segment into the one that adjoins it, as
    /// libipt reads an instruction that crosses sections (its test
    /// `truncated`); later segments hide earlier ones. `None` where nothing
    /// is mapped at `ip`.
    pub fn insn_bytes(&self, ip: u64) -> Option<([u8; MAX_INSN], usize)> {
        let mut code = [0; MAX_INSN];
        let mut len = 0;
        while len < MAX_INSN {
            let Some(byte) = self.byte_at(ip.wrapping_add(len as u64)) else {
                break;
            };
            code[len] = byte;
            len += 1;
        }
        (len > 0).then_some((code, len))
    }

    fn byte_at(&self, ip: u64) -> Option<u8> {
        self.segments.iter().rev().find_map(|s| {
            s.bytes
                .get(usize::try_from(ip.checked_sub(s.addr)?).ok()?)
                .copied()
        })
    }

    pub fn bytes_at(&self, ip: u64) -> Option<&[u8]> {
        self.segments.iter().rev().find_map(|s| {
            let off = ip.checked_sub(s.addr)?;
            s.bytes.get(off as usize..).filter(|rest| !rest.is_empty())
        })
    }
}

/// The longest an x86 instruction can be.
pub const MAX_INSN: usize = 15;

/// The GNU build-id of ELF `file` (named `path` in errors), in hex, or
/// `None` when it has none: what tells one build of a file from another.
pub fn build_id(path: &str, file: &[u8]) -> Result<Option<String>, ImageError> {
    Ok(Elf::parse(path, file)?.build_id()?)
}

/// A file named on the command line (`--image`): the user's own choice,
/// read as it is, so that `/dev/null` is an empty image as in libipt's
/// tests. Files other users choose (mappings) go through
/// `weft_symbols::read_file`.
fn read(path: &Path) -> Result<Vec<u8>, ImageError> {
    std::fs::read(path).map_err(|source| ImageError::Read {
        path: path.display().to_string(),
        source,
    })
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
        // An instruction's bytes run on into what hides or adjoins them.
        image.add(0x1004, vec![5, 6]);
        let (code, len) = image.insn_bytes(0x1001).unwrap();
        assert_eq!(&code[..len], [2, 9, 4, 5, 6]);
        assert_eq!(image.insn_bytes(0x1006), None);
    }

    /// An ELF header, one `PT_NOTE` program header, and `notes`.
    fn with_notes(notes: &[u8]) -> Vec<u8> {
        let mut file = b"\x7fELF\x02\x01\x01".to_vec();
        file.resize(0x20, 0);
        file.extend(64u64.to_le_bytes()); // program headers
        file.resize(0x36, 0);
        file.extend(56u16.to_le_bytes());
        file.extend(1u16.to_le_bytes());
        file.resize(64, 0);
        file.extend(4u32.to_le_bytes()); // PT_NOTE
        file.extend(4u32.to_le_bytes());
        file.extend(120u64.to_le_bytes()); // offset
        file.resize(64 + 32, 0);
        file.extend((notes.len() as u64).to_le_bytes());
        file.resize(120, 0);
        file.extend(notes);
        file
    }

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut note = Vec::new();
        for n in [name.len() as u32, desc.len() as u32, kind] {
            note.extend(n.to_le_bytes());
        }
        note.extend(name);
        note.resize(note.len().div_ceil(4) * 4, 0);
        note.extend(desc);
        note.resize(note.len().div_ceil(4) * 4, 0);
        note
    }

    #[test]
    fn the_build_id_is_the_gnu_note_of_its_type() {
        // An ABI tag first (type 1), then the build-id.
        let notes = [
            note(b"GNU\0", 1, &[0, 0, 0, 0, 3, 0, 0, 0]),
            note(b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef, 0x01]),
        ]
        .concat();
        let id = build_id("a.out", &with_notes(&notes)).unwrap();
        assert_eq!(id.as_deref(), Some("deadbeef01"));
        let other = note(b"Go\0\0", 3, &[1, 2]);
        assert_eq!(build_id("a.out", &with_notes(&other)).unwrap(), None);
        let mut cut = with_notes(&notes);
        cut.truncate(cut.len() - 8);
        let err = build_id("a.out", &cut).unwrap_err().to_string();
        assert!(
            err.contains("a.out") && err.contains("note segment offset or size"),
            "{err}"
        );
    }

    #[test]
    fn a_non_elf_file_without_address_is_refused() {
        let err = Image::new().add_elf("x.bin", b"\x90\x90").unwrap_err();
        assert!(err.to_string().contains("FILE:ADDR"), "{err}");
    }

    #[test]
    fn functions_of_an_elf_file_are_named_by_its_symbols() {
        // libc is an ELF file every test process has mapped: where getpid
        // is, less where libc is loaded, its dynamic symbols say getpid.
        unsafe extern "C" {
            fn getpid() -> i32;
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, path) = maps
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() == 6 && f[5].contains("/libc.so") && f[2] == "00000000")
            .map(|f| {
                let start = f[0].split('-').next().unwrap();
                (u64::from_str_radix(start, 16).unwrap(), f[5].to_string())
            })
            .expect("libc mapped");
        let mut image = Image::new();
        image
            .add_elf(&path, &std::fs::read(&path).unwrap())
            .unwrap();
        let getpid = getpid as *const () as u64 - start;
        let (name, offset) = image.symbol(getpid).expect("a symbol");
        assert!(name.contains("getpid"), "{name}");
        assert_eq!(offset, 0);
        assert_eq!(image.symbol(getpid + 1), Some((name, 1)));
        // Its code is mapped where the symbol says.
        assert!(image.bytes_at(getpid).is_some());
    }

    #[test]
    fn section_headers_outside_the_file_are_an_error_naming_it() {
        let path = "/proc/self/exe";
        let mut file = std::fs::read(path).unwrap();
        // Point every section header's offset past the end.
        let shoff = field(&file, 0x28, 8) as usize;
        let (size, count) = (
            field(&file, 0x3a, 2) as usize,
            field(&file, 0x3c, 2) as usize,
        );
        for i in 0..count {
            let at = shoff + i * size + 24;
            file[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        }
        let err = Image::new().add_elf(path, &file).unwrap_err();
        assert!(
            err.to_string().starts_with("/proc/self/exe: Invalid ELF"),
            "{err}"
        );
    }

    fn field(file: &[u8], at: usize, n: usize) -> u64 {
        crate::packet::le(&file[at..at + n])
    }

    #[test]
    fn a_process_image_from_its_maps_holds_its_code_and_names_its_functions() {
        unsafe extern "C" {
            fn getpid() -> i32;
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut image = Image::new();
        let skipped = image
            .add_maps(&maps, &mut |path| std::fs::read(path))
            .unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        // libc's getpid, where this process has it: the image holds the
        // same bytes as memory there, and names it.
        let at = getpid as *const () as u64;
        let (name, offset) = image.symbol(at).expect("a symbol");
        assert!(name.contains("getpid"), "{name}");
        assert_eq!(offset, 0);
        // SAFETY: getpid's first 16 bytes are mapped code of this process.
        let memory = unsafe { std::slice::from_raw_parts(at as *const u8, 16) };
        assert_eq!(&image.bytes_at(at).unwrap()[..16], memory);
        // And this test's own code, from the executable (position-independent).
        let here = a_process_image_from_its_maps_holds_its_code_and_names_its_functions as *const ()
            as u64;
        let (name, _) = image.symbol(here).expect("this test's symbol");
        assert!(name.contains("a_process_image_from_its_maps"), "{name}");
    }

    #[test]
    fn maps_lines_that_are_not_mappings_are_errors_and_unreadable_files_are_listed() {
        let mut image = Image::new();
        let err = image
            .add_maps("1000-2000 r-xp\n", &mut |_| Ok(Vec::new()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "maps line 1: \"1000-2000 r-xp\" is not a mapping"
        );
        let maps = "1000-2000 r-xp 00000000 08:01 42 /gone/lib.so\n3000-4000 rw-p 00000000 00:00 0 [heap]\n";
        let missing = |_: &Path| Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        let skipped = image.add_maps(maps, &mut { missing }).unwrap();
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].to_string().starts_with("/gone/lib.so:"),
            "{}",
            skipped[0]
        );
    }
}
