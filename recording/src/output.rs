//! A file a user names for weft's output (`weft trace -o FILE`), opened as
//! root without handing anyone else's file to the writer.
//!
//! A name in a directory another user owns or may write to could be a
//! link planted there, to a file of root's: such a name is opened with
//! `O_NOFOLLOW`, and an existing regular file must belong to the user weft
//! runs as. A link in a directory no one else can write to (`/dev/stderr`)
//! is the user's own choice and is followed. Devices and pipes are written
//! as they are; a regular file is emptied and made mode 0600.

use std::{
    fs::{File, OpenOptions},
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _},
    path::Path,
};

use crate::error::{Context as _, Error, Result, bail};

/// Opens `path` for writing as the module docs say.
pub fn create(path: &Path) -> Result<File> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // SAFETY: geteuid has no arguments and cannot fail.
    let user = unsafe { libc::geteuid() };
    let parent_meta = std::fs::metadata(parent)
        .with_context(|| format!("failed to read {}", parent.display()))?;
    // Another user's directory is theirs to plant links in, whatever its mode.
    let shared = parent_meta.mode() & 0o022 != 0 || ![0, user].contains(&parent_meta.uid());
    let mut options = OpenOptions::new();
    options.write(true).create(true).mode(0o600);
    if shared {
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            Error::Invalid(format!(
                "{} is a symbolic link in {}, a directory other users own or can write to; \
                 weft does not write through it (name the file it points to)",
                path.display(),
                parent.display()
            ))
        } else {
            Error::While {
                doing: format!("failed to create {}", path.display()),
                error: Box::new(e.into()),
            }
        }
    })?;
    let meta = file.metadata()?;
    if meta.is_file() {
        if meta.uid() != user {
            bail!(
                "{} belongs to uid {}, not to uid {user} that weft runs as; \
                 weft does not overwrite another user's file",
                path.display(),
                meta.uid()
            );
        }
        file.set_len(0)
            .with_context(|| format!("failed to empty {}", path.display()))?;
        // A file that was there keeps its mode through open(2): set it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("failed to make {} private", path.display()))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_link_in_a_shared_directory_is_not_written_through() {
        let dir = std::env::temp_dir().join(format!("weft-output-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "root's").unwrap();
        let link = dir.join("out.txt");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        // Private: the user's own link is followed.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        drop(create(&link).unwrap());
        assert_eq!(std::fs::read(&secret).unwrap(), b"");
        std::fs::write(&secret, "root's").unwrap();
        // Shared: refused, and the target is untouched.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let text = format!("{:#}", create(&link).unwrap_err());
        assert!(text.contains("symbolic link"), "{text}");
        assert_eq!(std::fs::read(&secret).unwrap(), b"root's");
        // Another user's directory, even one only they may write to.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            let text = format!("{:#}", create(&link).unwrap_err());
            assert!(text.contains("symbolic link"), "{text}");
            assert_eq!(std::fs::read(&secret).unwrap(), b"root's");
            std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
        }
        let fresh = dir.join("fresh.txt");
        drop(create(&fresh).unwrap());
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
