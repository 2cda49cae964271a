//! ELF, debug and trace files weft reads on a user's behalf, as root: the
//! path may be another user's choice (a mapping of their process, a
//! `.gnu_debuglink` name, a file on the command line). Such a file is read
//! only when it is a regular file of at most [`MAX_FILE_BYTES`], opened
//! without blocking: a FIFO or a device (`/dev/zero`) is refused at once,
//! never waited on or read without end.

use std::{
    fs::OpenOptions,
    io::{self, Read as _},
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
};

/// The largest file read whole: more than the largest debug files of big
/// C++ programs, and bounded so that a sparse file cannot take the host's
/// memory.
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// Reads the regular file at `path` whole, as the module docs say.
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    read_file_within(path, MAX_FILE_BYTES)
}

/// [`read_file`], for a file of at most `max` bytes.
pub fn read_file_within(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than the {max} bytes weft reads"),
        )
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_and_huge_files_are_refused_without_waiting() {
        let dir = std::env::temp_dir().join(format!("weft-read-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        for path in [fifo.as_path(), Path::new("/dev/zero")] {
            let error = read_file(path).unwrap_err();
            assert_eq!(
                error.to_string(),
                "not a regular file",
                "{}",
                path.display()
            );
        }
        // Sparse: no disk taken, and refused before a byte is read.
        let huge = dir.join("huge");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        assert!(
            read_file(&huge)
                .unwrap_err()
                .to_string()
                .contains("larger than")
        );
        std::fs::write(dir.join("small"), b"elf").unwrap();
        assert_eq!(read_file(&dir.join("small")).unwrap(), b"elf");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
