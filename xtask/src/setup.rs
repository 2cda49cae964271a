//! `cargo xtask setup`: installs what a fresh Debian 12 machine lacks, and
//! nothing when all is present. Uses `sudo` only when not root.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::exec::{exec, is_root, output};

/// Debian packages weft's build needs (see DESIGN.md, "Toolchain").
const PACKAGES: &[&str] = &[
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
];

/// The bpf-linker release that builds against Debian's LLVM 22.
const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn run() -> Result<()> {
    install_packages(PACKAGES)?;
    install_bpf_linker()?;
    println!("setup: everything is installed");
    Ok(())
}

/// Installs the Debian packages of `wanted` that are missing.
pub fn install_packages(wanted: &[&str]) -> Result<()> {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|package| !is_installed(package))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!("setup: installing Debian packages: {}", missing.join(" "));
    exec(privileged("apt-get").args(["update", "-q"]))?;
    exec(
        privileged("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn is_installed(package: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]))
        .is_ok_and(|status| status == "install ok installed")
}

fn install_bpf_linker() -> Result<()> {
    let installed = output(Command::new(bpf_linker_path()).arg("--version"))
        .is_ok_and(|version| version.contains(BPF_LINKER_VERSION));
    if installed {
        return Ok(());
    }
    println!("setup: building bpf-linker {BPF_LINKER_VERSION} against llvm-22 (a few minutes)");
    let path = format!(
        "/usr/lib/llvm-22/bin:{}",
        std::env::var("PATH").context("PATH is not set")?
    );
    exec(
        Command::new("cargo")
            .args(["install", &format!("bpf-linker@{BPF_LINKER_VERSION}")])
            .args(["--locked", "--no-default-features", "--features", "llvm-22"])
            .env("PATH", path),
    )
}

fn bpf_linker_path() -> String {
    let home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    format!("{home}/bin/bpf-linker")
}

/// `program` run as root: directly when we are root, through sudo otherwise.
pub fn privileged(program: &str) -> Command {
    if is_root() {
        Command::new(program)
    } else {
        let mut cmd = Command::new("sudo");
        cmd.arg(program);
        cmd
    }
}
