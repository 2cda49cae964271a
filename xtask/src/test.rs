//! `cargo xtask test`: setup, build, then every test: formatting, lints, unit
//! tests, and the root integration tests against the running kernel.

use std::process::Command;

use anyhow::{Result, bail};

use crate::{
    exec::{exec, is_root, workspace_root},
    run::build_weft_release,
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Only run integration tests whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip `cargo fmt --check` and clippy.
    #[arg(long)]
    no_lint: bool,
}

pub fn run(options: &Options) -> Result<()> {
    setup::run()?;
    let root = workspace_root();
    let cargo = || {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(&root);
        cmd
    };
    if !options.no_lint {
        exec(cargo().args(["fmt", "--all", "--check"]))?;
        exec(cargo().args([
            "clippy",
            "--locked",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    exec(cargo().args(["test", "--locked", "--workspace", "--exclude", "weft-tests"]))?;
    let weft = build_weft_release()?;
    if !is_root() {
        bail!("the kernel tests need root: run `sudo -E cargo xtask test`");
    }
    let mut integration = cargo();
    integration
        .args([
            "test",
            "--locked",
            "--package",
            "weft-tests",
            "--",
            "--test-threads=1",
        ])
        .env("WEFT_BIN", weft)
        .env("WEFT_PYTHON", setup::duckdb_python());
    if let Some(filter) = &options.filter {
        integration.arg(filter);
    }
    exec(&mut integration)
}
