// The one recipe for building weft's eBPF object, `include!`d by
// `kernel/build.rs` and `xtask/src/build_ebpf.rs` so both build it identically.
//
// Debian's rustc-web ships a prebuilt `core` for bpfel-unknown-none
// (libstd-rust-web-dev-bpf), so no `-Z build-std` is needed; aya-ebpf uses
// unstable features, hence RUSTC_BOOTSTRAP. `--btf` makes bpf-linker emit the
// BTF that the map-of-maps definitions need.

/// Debian's rustc that has `core` for the BPF target.
const EBPF_RUSTC: &str = "/usr/bin/rustc";
/// Debian's cargo matching [`EBPF_RUSTC`].
const EBPF_CARGO: &str = "/usr/bin/cargo";
/// The eBPF target triple.
const EBPF_TARGET: &str = "bpfel-unknown-none";
/// llvm-22's objcopy (llvm-22-dev, which bpf-linker is built against,
/// depends on llvm-22).
#[allow(dead_code, reason = "only kernel/build.rs strips the objects it embeds")]
const EBPF_OBJCOPY: &str = "/usr/lib/llvm-22/bin/llvm-objcopy";

/// The `cargo build` of `ebpf/` into `target_dir`; the object ends up at
/// [`ebpf_object_path`].
fn ebpf_build_command(workspace_root: &std::path::Path, target_dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(EBPF_CARGO);
    cmd.current_dir(workspace_root.join("ebpf"))
        .args(["build", "--release", "--locked", "--target", EBPF_TARGET, "--target-dir"])
        .arg(target_dir)
        .env("RUSTC", EBPF_RUSTC)
        .env("RUSTC_BOOTSTRAP", "1")
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            ["--cfg=bpf_target_arch=\"x86_64\"", "-Cdebuginfo=2", "-Clink-arg=--btf"].join("\x1f"),
        );
    // Variables an outer cargo sets that would leak the host toolchain in.
    for key in ["RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTUP_TOOLCHAIN"] {
        cmd.env_remove(key);
    }
    // bpf-linker is installed by `cargo install` into $CARGO_HOME/bin.
    if let Some(home) = std::env::var_os("HOME") {
        let mut path = std::ffi::OsString::from(std::path::Path::new(&home).join(".cargo/bin"));
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        cmd.env("PATH", path);
    }
    cmd
}

/// Copies the object at `from` to `to` without its DWARF. The kernel takes
/// none of it (the BTF that bpf-linker made from it stays), and aya parses
/// every relocation of every section as it loads an object: the debug
/// sections' were most of a one-liner's start-up in user space.
#[allow(dead_code, reason = "only kernel/build.rs strips the objects it embeds")]
fn ebpf_strip_debug(from: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    let status = std::process::Command::new(EBPF_OBJCOPY)
        .arg("--strip-debug")
        .arg(from)
        .arg(to)
        .status()
        .map_err(|e| format!("failed to run {EBPF_OBJCOPY}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{EBPF_OBJCOPY} --strip-debug {} failed ({status})", from.display()))
    }
}

/// Where [`ebpf_build_command`] leaves the object of the event sources.
fn ebpf_object_path(target_dir: &std::path::Path) -> std::path::PathBuf {
    target_dir.join(EBPF_TARGET).join("release").join("weft-ebpf")
}

/// Where [`ebpf_build_command`] leaves the object of `weft trace`.
#[allow(dead_code, reason = "xtask includes this file and needs only the first object")]
fn ebpf_oneliner_object_path(target_dir: &std::path::Path) -> std::path::PathBuf {
    target_dir.join(EBPF_TARGET).join("release").join("weft-oneliner-ebpf")
}
