//! The secret every host of a fleet shares, and the signatures made with
//! it: HMAC-SHA256 over a request (with its time and a fresh nonce) and
//! over the reply to it (with the request's nonce), so that neither a
//! stranger's request nor a stranger's reply is taken, nor an old one
//! replayed.

use std::{fmt::Write as _, os::fd::AsFd, path::Path};

use hmac::{Hmac, Mac};
use rustix::fs::{FileType, Mode, OFlags};
use sha2::Sha256;

use crate::Error;

/// The most bytes a secret file may hold.
pub const MAX_SECRET_FILE: u64 = 4096;

/// The fewest bytes a secret may have (after trimming whitespace).
pub const MIN_SECRET: usize = 16;

/// A shared secret, read from a file only root (or the user weft runs as)
/// can read.
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Reads the secret in `path`: a regular file, not a link, with one
    /// name, owned by root or this user, readable by its owner alone, of at
    /// most [`MAX_SECRET_FILE`] bytes and holding at least [`MIN_SECRET`].
    pub fn read(path: &Path) -> Result<Self, Error> {
        let refuse = |why: String| Error::Secret {
            path: path.display().to_string(),
            why,
        };
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            refuse(if e == rustix::io::Errno::LOOP {
                "it is a symbolic link, which is refused".into()
            } else {
                format!("cannot open it: {e}")
            })
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| refuse(e.to_string()))?;
        let me = rustix::process::geteuid().as_raw();
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refuse("it is not a regular file".into()));
        }
        if stat.st_uid != 0 && stat.st_uid != me {
            return Err(refuse(format!(
                "it belongs to uid {}, not root or this user",
                stat.st_uid
            )));
        }
        if stat.st_mode & 0o077 != 0 {
            return Err(refuse(format!(
                "other users may read or write it (mode {:o}): chmod 600 it",
                stat.st_mode & 0o777
            )));
        }
        if stat.st_nlink != 1 {
            return Err(refuse("it has more than one name (a hard link)".into()));
        }
        if stat.st_size.cast_unsigned() > MAX_SECRET_FILE {
            return Err(refuse(format!(
                "it holds {} bytes, more than a secret's {MAX_SECRET_FILE}",
                stat.st_size
            )));
        }
        let mut bytes = vec![0u8; MAX_SECRET_FILE as usize + 1];
        let mut len = 0;
        loop {
            let n = rustix::io::read(fd.as_fd(), &mut bytes[len..])
                .map_err(|e| refuse(e.to_string()))?;
            if n == 0 || len + n > MAX_SECRET_FILE as usize {
                len += n;
                break;
            }
            len += n;
        }
        if len > MAX_SECRET_FILE as usize {
            return Err(refuse("it grew while being read".into()));
        }
        let secret = bytes[..len].trim_ascii().to_vec();
        if secret.len() < MIN_SECRET {
            return Err(refuse(format!(
                "it holds {} bytes; a secret needs at least {MIN_SECRET} (e.g. `head -c 32 /dev/urandom | base64`)",
                secret.len()
            )));
        }
        Ok(Self(secret))
    }

    /// A secret from bytes, for tests.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }

    /// The signature of `parts`, each length-prefixed so that no two
    /// different messages sign alike.
    pub fn sign(&self, parts: &[&[u8]]) -> String {
        hex(&self.mac(parts).finalize().into_bytes())
    }

    /// Whether `signature` is `parts`' (compared in constant time).
    pub fn verify(&self, parts: &[&[u8]], signature: &str) -> bool {
        unhex(signature).is_some_and(|bytes| self.mac(parts).verify_slice(&bytes).is_ok())
    }

    fn mac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }
}

/// A fresh random nonce, as hex.
pub fn nonce() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .map_err(|e| Error::Http(format!("no random bytes for a nonce: {e}")))?;
    Ok(hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    use super::*;

    #[test]
    fn signatures_check_every_part() {
        let secret = Secret::from_bytes(b"0123456789abcdef0123");
        let signature = secret.sign(&[b"POST", b"/fleet", b"body"]);
        assert!(secret.verify(&[b"POST", b"/fleet", b"body"], &signature));
        assert!(!secret.verify(&[b"POST", b"/fleet", b"bodz"], &signature));
        assert!(!secret.verify(&[b"POST", b"/flee", b"tbody"], &signature));
        assert!(
            !Secret::from_bytes(b"another secret, long")
                .verify(&[b"POST", b"/fleet", b"body"], &signature)
        );
        assert!(!secret.verify(&[b"POST", b"/fleet", b"body"], "zz"));
    }

    #[test]
    fn a_secret_file_others_could_read_or_swap_is_refused() {
        let dir = std::env::temp_dir().join(format!("weft-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("key");
        std::fs::write(&file, "a-secret-of-enough-bytes\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Secret::read(&file).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Secret::read(&file).is_ok());
        let link = dir.join("link");
        symlink(&file, &link).unwrap();
        let error = Secret::read(&link).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        let hard = dir.join("hard");
        std::fs::hard_link(&file, &hard).unwrap();
        let error = Secret::read(&file).unwrap_err().to_string();
        assert!(error.contains("hard link"), "{error}");
        std::fs::remove_file(&hard).unwrap();
        std::fs::write(&file, "short").unwrap();
        let error = Secret::read(&file).unwrap_err().to_string();
        assert!(error.contains("at least 16"), "{error}");
        std::fs::write(&file, vec![b'x'; 5000]).unwrap();
        let error = Secret::read(&file).unwrap_err().to_string();
        assert!(error.contains("more than"), "{error}");
        let error = Secret::read(&dir).unwrap_err().to_string();
        assert!(error.contains("regular file"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
