//! `cargo xtask setup`: installs what a fresh Debian 12 machine lacks, and
//! nothing when all is present. Uses `sudo` only when not root.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::exec::{exec, is_root, output};

/// Debian packages weft's build needs (see DESIGN.md, "Toolchain"):
/// all that `cargo xtask run` installs.
const BUILD_PACKAGES: &[&str] = &[
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
    // zstd's C sources, for compressed Parquet exports.
    "gcc",
];

/// Debian packages the tests need besides: the tools weft is checked
/// against.
const TEST_PACKAGES: &[&str] = &[
    // The export test checks Parquet files with DuckDB from PyPI, in a venv.
    "python3",
    "python3-venv",
    // The terminal UI test drives `weft` in a real terminal.
    "tmux",
    // The perf.data tests check weft's reading against perf's own.
    "linux-perf",
    // The one-liner tests compare weft's maps with bpftrace's, and run the
    // tools it ships.
    "bpftrace",
    // The symbol and uprobe-argument tests build C and C++ programs and
    // split off their debug info.
    "g++",
    "binutils",
    // The pcapng export test reads weft's file with Wireshark's tshark.
    "tshark",
    // The metrics test has a Prometheus server scrape `weft record`.
    "prometheus",
    // A record test has strace count weft's bpf() calls.
    "strace",
];

/// The `DuckDB` release the export test reads Parquet with.
const DUCKDB_VERSION: &str = "2.0.0";

/// Perfetto's Python package, whose protos read the Perfetto export, and
/// the protobuf runtime they need.
const PERFETTO_VERSION: &str = "0.59.1";
const PROTOBUF_VERSION: &str = "7.36.2";

/// Apache Spark's Python package (local mode, on the installed Java 17), for
/// the partitioned export test.
const PYSPARK_VERSION: &str = "4.3.0";

/// The inferno release whose `inferno-flamegraph` draws the folded-stacks
/// export in its test.
const INFERNO_VERSION: &str = "0.12.8";

/// The bpf-linker release that builds against Debian's LLVM 22.
const BPF_LINKER_VERSION: &str = "0.13.0";

/// Everything building, running and testing weft needs.
pub fn run() -> Result<()> {
    build()?;
    install_packages(TEST_PACKAGES)?;
    install_duckdb()?;
    install_inferno()?;
    println!("setup: everything is installed");
    Ok(())
}

/// What building and running weft needs, and no more: the toolchain and
/// bpf-linker (`cargo xtask run`).
pub fn build() -> Result<()> {
    install_packages(BUILD_PACKAGES)?;
    install_bpf_linker()
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

/// A Python venv in the tools cache with `DuckDB`, Perfetto's protos and
/// Spark, for the export tests.
fn install_duckdb() -> Result<()> {
    let python = duckdb_python();
    let check = "import duckdb, perfetto, google.protobuf, pyspark; \
                 print(duckdb.__version__, google.protobuf.__version__, pyspark.__version__)";
    let wanted = format!("{DUCKDB_VERSION} {PROTOBUF_VERSION} {PYSPARK_VERSION}");
    let installed = output(Command::new(&python).args(["-c", check]))
        .is_ok_and(|versions| versions.trim() == wanted);
    if installed {
        return Ok(());
    }
    let venv = python
        .parent()
        .and_then(std::path::Path::parent)
        .context("venv path")?;
    println!(
        "setup: installing duckdb {DUCKDB_VERSION}, perfetto {PERFETTO_VERSION} and pyspark {PYSPARK_VERSION} into {}",
        venv.display()
    );
    exec(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(venv),
    )?;
    exec(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .arg(format!("duckdb=={DUCKDB_VERSION}"))
            .arg(format!("perfetto=={PERFETTO_VERSION}"))
            .arg(format!("protobuf=={PROTOBUF_VERSION}"))
            .arg(format!("pyspark=={PYSPARK_VERSION}")),
    )
}

/// inferno's flame graph tools in the tools cache, for the folded-stacks
/// export test.
fn install_inferno() -> Result<()> {
    // inferno's tools have no --version: ask cargo what it installed there.
    let root = tools_cache().join("inferno");
    let installed = output(
        Command::new("cargo")
            .args(["install", "--list", "--root"])
            .arg(&root),
    )
    .is_ok_and(|list| list.contains(&format!("inferno v{INFERNO_VERSION}:")));
    if installed && flamegraph().exists() {
        return Ok(());
    }
    println!("setup: building inferno {INFERNO_VERSION} (a minute)");
    exec(
        Command::new("cargo")
            .args([
                "install",
                &format!("inferno@{INFERNO_VERSION}"),
                "--locked",
                "--root",
            ])
            .arg(root),
    )
}

/// inferno's `inferno-flamegraph`.
pub fn flamegraph() -> std::path::PathBuf {
    tools_cache().join("inferno/bin/inferno-flamegraph")
}

/// The Python interpreter of the `DuckDB` venv.
pub fn duckdb_python() -> std::path::PathBuf {
    tools_cache().join("duckdb/bin/python")
}

/// Where setup keeps the test tools it builds (inferno, the Python venv):
/// the user's cache (`$XDG_CACHE_HOME/weft`, else `~/.cache/weft`), not
/// `target/`, so that a clean clone does not build them again (a minute and
/// a half of each CI run). Each install checks its versions.
fn tools_cache() -> std::path::PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(cache) = var("XDG_CACHE_HOME") {
        std::path::PathBuf::from(cache).join("weft")
    } else if let Some(home) = var("HOME") {
        std::path::PathBuf::from(home).join(".cache/weft")
    } else {
        crate::exec::workspace_root().join("target")
    }
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
