//! `cargo xtask install [--prefix DIR]`: builds weft (installing the
//! toolchain when something is missing, not the test tools) and puts the
//! binary, its man pages and its shell completions where the system looks
//! for them. The binary holds its eBPF objects: it is all there is to copy.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result};

use crate::{exec::output, run, setup};

#[derive(clap::Args)]
pub struct Options {
    /// Where to install: the binary into PREFIX/bin, the man pages into
    /// PREFIX/share/man/man1, the completions of bash, zsh and fish under
    /// PREFIX/share.
    #[arg(long, value_name = "DIR", default_value = "/usr/local")]
    pub prefix: PathBuf,
}

/// Where each shell looks for a completion script, under the prefix.
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "share/bash-completion/completions/weft"),
    ("zsh", "share/zsh/site-functions/_weft"),
    ("fish", "share/fish/vendor_completions.d/weft.fish"),
];

pub fn run(options: &Options) -> Result<()> {
    setup::build()?;
    let weft = PathBuf::from(run::build_weft_release()?);
    let installed = install(&weft, &options.prefix)?;
    for path in &installed {
        println!("installed {}", path.display());
    }
    Ok(())
}

/// Puts `weft`, its man pages and completions under `prefix`, each
/// readable by everyone (the binary executable too); returns their paths.
pub fn install(weft: &Path, prefix: &Path) -> Result<Vec<PathBuf>> {
    let mut installed = vec![put_binary(weft, &prefix.join("bin/weft"))?];
    // `weft man` writes its pages as weft writes every file, mode 0600;
    // installed pages are for every user to read.
    let pages = private_dir("weft-man")?;
    output(Command::new(weft).arg("man").arg(&pages))?;
    let mut names: Vec<_> = fs::read_dir(&pages)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    for name in names {
        let page = fs::read(pages.join(&name))?;
        installed.push(put(
            &page,
            &prefix.join("share/man/man1").join(name),
            0o644,
        )?);
    }
    let _ = fs::remove_dir_all(&pages);
    for (shell, path) in COMPLETIONS {
        let script = output(Command::new(weft).args(["completions", shell]))?;
        installed.push(put(script.as_bytes(), &prefix.join(path), 0o644)?);
    }
    Ok(installed)
}

/// Writes `bytes` to `path` with `mode`.
fn put(bytes: &[u8], path: &Path, mode: u32) -> Result<PathBuf> {
    place(path, mode, |tmp| {
        use std::{io::Write as _, os::unix::fs::OpenOptionsExt as _};
        // A new file: never one a link planted at the temporary name leads to.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp)
            .with_context(|| format!("failed to create {}", tmp.display()))?;
        file.write_all(bytes)
            .with_context(|| format!("failed to write {}", tmp.display()))
    })
}

/// Installs `weft` at `path` without its debug info (built in for
/// `perf`'s sake: 111 MB, 18 MB without).
fn put_binary(weft: &Path, path: &Path) -> Result<PathBuf> {
    place(path, 0o755, |tmp| {
        let mut strip = Command::new("strip");
        output(strip.arg("--strip-debug").arg("-o").arg(tmp).arg(weft)).map(drop)
    })
}

/// Makes `path` with `mode` from what `write` puts at a temporary path
/// beside it, replacing what was there at once (a running weft keeps its
/// own copy of the binary).
fn place(path: &Path, mode: u32, write: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let dir = path.parent().context("an install path has a directory")?;
    fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let tmp = path.with_extension("weft-install");
    // Left by an install that was stopped (the link itself, not its target).
    if fs::symlink_metadata(&tmp).is_ok() {
        fs::remove_file(&tmp).with_context(|| format!("failed to remove {}", tmp.display()))?;
    }
    write(&tmp)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, path).with_context(|| format!("failed to install {}", path.display()))?;
    Ok(path.to_path_buf())
}

/// Installs `weft` into a scratch prefix and checks what a user finds
/// there: the binary runs, its page is where `man` looks, each shell's
/// completions where that shell looks, all readable by everyone.
pub fn check(weft: &Path) -> Result<()> {
    let prefix = private_dir("weft-install")?;
    let checked = install(weft, &prefix).and_then(|installed| check_installed(&prefix, &installed));
    let _ = fs::remove_dir_all(&prefix);
    checked
}

fn check_installed(prefix: &Path, installed: &[PathBuf]) -> Result<()> {
    let mode =
        |path: &Path| -> Result<u32> { Ok(fs::metadata(path)?.permissions().mode() & 0o777) };
    let bin = prefix.join("bin/weft");
    anyhow::ensure!(mode(&bin)? == 0o755, "{} is not mode 0755", bin.display());
    let version = output(Command::new(&bin).arg("--version"))?;
    anyhow::ensure!(
        version.starts_with("weft "),
        "{} --version printed {version:?}",
        bin.display()
    );
    let page = prefix.join("share/man/man1/weft.1");
    anyhow::ensure!(
        fs::read_to_string(&page)?.contains("\n.TH "),
        "{} is not a man page",
        page.display()
    );
    for (shell, path) in COMPLETIONS {
        let script = fs::read_to_string(prefix.join(path))?;
        anyhow::ensure!(script.contains("weft"), "no {shell} completions in {path}");
    }
    for path in installed {
        anyhow::ensure!(
            mode(path)? & 0o444 == 0o444,
            "{} is not readable by everyone",
            path.display()
        );
    }
    Ok(())
}

/// A new directory of this process's own in the temporary directory, mode
/// 0700: made afresh (an error if one of that name reappears meanwhile),
/// so that nothing another user put at its name is written through.
fn private_dir(name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    // Ours from an earlier run with this pid; a link is removed, not followed.
    let _ = fs::remove_dir_all(&path);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .with_context(|| format!("failed to create {}", path.display()))?;
    Ok(path)
}
