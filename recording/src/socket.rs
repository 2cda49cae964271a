//! weft's Unix sockets live in `/run/weft`: created here, stale ones (left
//! by a killed weft) replaced, and removed when dropped.

use std::{
    fs::{self, DirBuilder},
    os::unix::{
        fs::{DirBuilderExt as _, PermissionsExt as _},
        net::{UnixListener, UnixStream},
    },
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

/// A bound socket's path; the file is removed on drop.
pub struct Bound {
    path: PathBuf,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Listens at `path`, mode 0600, or 0660 with group `gid`. `None` when a
/// live weft already listens there. The directory is root's, and
/// traversable by others only when a group is allowed in.
pub fn bind(path: &Path, gid: Option<u32>) -> Result<Option<(UnixListener, Bound)>> {
    let parent = path.parent().context("socket path has a parent")?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .with_context(|| format!("failed to create {}", parent.display()))?;
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Ok(None);
        }
        let _ = fs::remove_file(path);
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("failed to listen on {}", path.display()))?;
    let bound = Bound {
        path: path.to_owned(),
    };
    let mode = if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .with_context(|| format!("failed to give {} to group {gid}", path.display()))?;
        fs::set_permissions(parent, fs::Permissions::from_mode(0o711))?;
        0o660
    } else {
        0o600
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("failed to restrict {}", path.display()))?;
    Ok(Some((listener, bound)))
}
