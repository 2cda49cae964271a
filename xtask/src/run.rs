//! `cargo xtask run -- <weft args>`: builds weft (installing the toolchain
//! when something is missing, not the test tools) and runs it, through
//! sudo when not root.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::{
    exec::{exec, workspace_root},
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Arguments passed to `weft`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

pub fn run(options: &Options) -> Result<()> {
    setup::build()?;
    let weft = build_weft_release()?;
    let mut cmd = setup::privileged(&weft);
    let status = cmd
        .args(&options.args)
        .status()
        .with_context(|| format!("failed to start {cmd:?}"))?;
    // weft printed its own error; pass its exit code on unchanged.
    std::process::exit(status.code().unwrap_or(2));
}

/// `cargo xtask man`: weft writes its man pages into `target/man`.
pub fn man() -> Result<()> {
    let weft = build_weft_release()?;
    let dir = workspace_root().join("target/man");
    exec(Command::new(&weft).arg("man").arg(&dir))?;
    println!("man: read one with `man -l {}/weft.1`", dir.display());
    Ok(())
}

/// Builds the `weft` binary in release mode and returns its path.
pub fn build_weft_release() -> Result<String> {
    build_release(&["--package", "weft"])?;
    Ok(workspace_root()
        .join("target/release/weft")
        .display()
        .to_string())
}

/// `cargo build --release --locked ARGS` in the workspace.
pub fn build_release(args: &[&str]) -> Result<()> {
    exec(
        Command::new("cargo")
            .current_dir(workspace_root())
            .args(["build", "--release", "--locked"])
            .args(args),
    )
}
