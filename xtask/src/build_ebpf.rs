//! `cargo xtask build-ebpf`: builds `ebpf/` exactly as `kernel/build.rs` does.

use std::path::PathBuf;

use anyhow::Result;

use crate::exec::{exec, workspace_root};

include!("../../ebpf/cargo_build.rs");

/// Builds the eBPF object and returns its path.
pub fn run() -> Result<PathBuf> {
    let root = workspace_root();
    let target_dir = root.join("target/ebpf");
    exec(&mut ebpf_build_command(&root, &target_dir))?;
    Ok(ebpf_object_path(&target_dir))
}
