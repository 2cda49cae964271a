//! A capture directory, opened once and used through its descriptor.
//!
//! weft runs as root, and a capture may lie where other users can reach.
//! So every file inside is opened relative to the directory's descriptor
//! (a rename of the path after the open changes nothing), never through a
//! symbolic link (`O_NOFOLLOW`: a planted link is an error naming it, for
//! writers and readers alike), never blocking (`O_NONBLOCK`: a FIFO is
//! refused, not waited on) and only when it is a regular file. New files
//! are made with `O_EXCL`, mode 0600: an existing name is never reused.
//! A directory written to must belong to the user weft runs as and be
//! writable by no one else, so that no one else can plant a name in it.

use std::{
    ffi::CStr,
    fs::File,
    os::{
        fd::{AsFd, BorrowedFd, OwnedFd},
        unix::fs::DirBuilderExt as _,
    },
    path::{Path, PathBuf},
};

use rustix::{
    fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat},
    io::Errno,
};

use crate::error::{Error, Result};

/// An open capture directory (see the module docs).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Opens the directory at `path` to read. `path` itself may pass
    /// through links (the user named it); nothing inside is followed.
    pub fn open(path: &Path) -> Result<Self> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
            Errno::NOENT => Error::Invalid(format!(
                "{} is not a weft capture (no such directory)",
                path.display()
            )),
            e => errno("open", path)(e),
        })?;
        Ok(Self {
            fd,
            path: path.to_owned(),
        })
    }

    /// Opens the directory at `path` to write into, making it (mode 0700,
    /// and its missing parents) when absent. Refused when `path` is a
    /// link, or the directory is not owned by the effective user or is
    /// writable by group or others: another user could then plant links.
    pub fn open_to_write(path: &Path) -> Result<Self> {
        if rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(crate::error::io("mkdir", path))?;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(errno("open", path))?;
        let stat = rustix::fs::fstat(&fd).map_err(errno("stat", path))?;
        check_owned(&stat, path)?;
        Ok(Self {
            fd,
            path: path.to_owned(),
        })
    }

    /// The path the directory was opened by, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name`'s path, for messages.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Opens the regular file `name` to read.
    pub fn open_file(&self, name: &str) -> Result<File> {
        self.open_at(name, OFlags::RDONLY)
    }

    /// Opens the existing regular file `name` to read and write.
    pub fn open_file_rw(&self, name: &str) -> Result<File> {
        self.open_at(name, OFlags::RDWR)
    }

    /// Creates the file `name`, mode 0600; an existing name is an error.
    pub fn create(&self, name: &str) -> Result<File> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(errno("create", &self.join(name)))?;
        Ok(File::from(fd))
    }

    /// Whether anything (a file, a link, ...) is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.stat(name).is_ok()
    }

    /// `name`'s own status (a link's, not its target's).
    pub fn stat(&self, name: &str) -> Result<Stat> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(errno("stat", &self.join(name)))
    }

    /// Removes the file `name`.
    pub fn remove(&self, name: &str) -> Result<()> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())
            .map_err(errno("remove", &self.join(name)))
    }

    /// Removes the file `name` if it exists.
    pub fn remove_if_present(&self, name: &str) -> Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Err(Errno::NOENT) => Ok(()),
            done => done.map_err(errno("remove", &self.join(name))),
        }
    }

    /// Renames `from` to `to` within the directory, replacing `to`.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(errno("rename", &self.join(to)))
    }

    /// Makes the directory's entries (new, renamed, removed files) durable.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(errno("fsync", &self.path))
    }

    /// The names in the directory, `.` and `..` left out; names that are
    /// not UTF-8 are given lossily (they are never store files).
    pub fn names(&self) -> Result<Vec<String>> {
        let listing = rustix::fs::openat(
            &self.fd,
            c".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno("read dir", &self.path))?;
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::new(listing).map_err(errno("read dir", &self.path))? {
            let entry = entry.map_err(errno("read dir", &self.path))?;
            let name: &CStr = entry.file_name();
            if name != c"." && name != c".." {
                names.push(name.to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    /// Bytes the file `name` takes on disk: its length, or less where it
    /// has holes (the logs, where deleted segments' entries were); 0 when
    /// it is gone (a `meta.tmp` comes and goes while weft lists).
    pub fn bytes_on_disk(&self, name: &str) -> u64 {
        self.stat(name).map_or(0, |s| {
            let len = u64::try_from(s.st_size).unwrap_or(0);
            let allocated = u64::try_from(s.st_blocks).unwrap_or(0).saturating_mul(512);
            len.min(allocated)
        })
    }

    /// Bytes the directory's files take on disk, as [`Dir::bytes_on_disk`].
    pub fn disk_use(&self) -> Result<u64> {
        Ok(self.names()?.iter().map(|n| self.bytes_on_disk(n)).sum())
    }

    /// Reads the regular file `name` whole, refusing one over `limit` bytes.
    pub fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>> {
        use std::io::Read as _;
        let file = self.open_file(name)?;
        let path = self.join(name);
        let len = file
            .metadata()
            .map_err(crate::error::io("stat", &path))?
            .len();
        if len > limit {
            return Err(Error::Corrupt {
                path,
                offset: 0,
                what: format!("{len} bytes, more than the {limit} a store writes"),
            });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(crate::error::io("read", &path))?;
        Ok(bytes)
    }

    fn open_at(&self, name: &str, access: OFlags) -> Result<File> {
        // Non-blocking so that a FIFO is refused below rather than waited
        // on; for regular files the flag changes nothing.
        let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let path = self.join(name);
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())
            .map_err(errno("open", &path))?;
        let stat = rustix::fs::fstat(&fd).map_err(errno("stat", &path))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(Error::Unsafe {
                path,
                what: "is not a regular file".into(),
            });
        }
        Ok(File::from(fd))
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Refuses a directory another user owns or may write to.
fn check_owned(stat: &Stat, path: &Path) -> Result<()> {
    let user = rustix::process::geteuid().as_raw();
    if stat.st_uid != user {
        return Err(Error::Unsafe {
            path: path.to_owned(),
            what: format!(
                "is owned by uid {}, not by uid {user} that weft runs as; \
                 another user could plant links in it. Give a directory of your own \
                 (or a new path, which weft makes with mode 0700)",
                stat.st_uid
            ),
        });
    }
    if stat.st_mode & 0o022 != 0 {
        return Err(Error::Unsafe {
            path: path.to_owned(),
            what: format!(
                "is writable by group or others (mode {:o}); another user could plant \
                 links in it. Run `chmod go-w {}` or give a new path",
                stat.st_mode & 0o7777,
                path.display()
            ),
        });
    }
    Ok(())
}

/// Wraps an `Errno` like [`crate::error::io`], saying plainly when the
/// name was a link (`O_NOFOLLOW` fails with `ELOOP`).
fn errno<'a>(call: &'static str, path: &'a Path) -> impl FnOnce(Errno) -> Error + 'a {
    move |errno| match errno {
        Errno::LOOP => Error::Unsafe {
            path: path.to_owned(),
            what: "is a symbolic link; weft never follows links in a capture".into(),
        },
        Errno::NOTDIR if call == "open" => Error::Unsafe {
            path: path.to_owned(),
            what: "is not a directory (or is a symbolic link to one)".into(),
        },
        _ => Error::Io {
            call,
            path: path.to_owned(),
            error: errno.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_link_inside_is_refused_by_readers_and_writers() {
        let path = scratch("link");
        let dir = Dir::open_to_write(&path).unwrap();
        let target = path.join("target");
        std::fs::write(&target, b"secret").unwrap();
        std::os::unix::fs::symlink(&target, path.join("records-0000000000.log")).unwrap();
        for error in [
            dir.open_file("records-0000000000.log").unwrap_err(),
            dir.open_file_rw("records-0000000000.log").unwrap_err(),
            dir.create("records-0000000000.log").unwrap_err(),
        ] {
            let text = error.to_string();
            assert!(
                text.contains("records-0000000000.log")
                    && (text.contains("symbolic link") || text.contains("exists")),
                "{text}"
            );
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let path = scratch("fifo");
        let dir = Dir::open_to_write(&path).unwrap();
        rustix::fs::mknodat(&dir, "meta", FileType::Fifo, Mode::RUSR | Mode::WUSR, 0).unwrap();
        let text = dir.read("meta", 1 << 20).unwrap_err().to_string();
        assert!(text.contains("not a regular file"), "{text}");
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_is_refused_and_a_new_one_is_0700() {
        let path = scratch("mode");
        Dir::open_to_write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let text = Dir::open_to_write(&path).unwrap_err().to_string();
        assert!(text.contains("writable by group or others"), "{text}");
        let link = scratch("mode-link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        let text = Dir::open_to_write(&link).unwrap_err().to_string();
        assert!(text.contains("symbolic link"), "{text}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn a_file_larger_than_its_limit_is_refused() {
        let path = scratch("limit");
        let dir = Dir::open_to_write(&path).unwrap();
        std::fs::write(path.join("meta"), vec![b'x'; 100]).unwrap();
        assert_eq!(dir.read("meta", 100).unwrap().len(), 100);
        assert!(
            dir.read("meta", 99)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        std::fs::remove_dir_all(&path).unwrap();
    }
}
