//! Builds the eBPF object from `ebpf/` so that `cargo build` of weft never
//! embeds a stale probe. Set `WEFT_SKIP_EBPF=1` to skip it (fast `cargo check`
//! and clippy); such a binary refuses to load probes and says why.

use std::{env, fs, path::PathBuf};

include!("../ebpf/cargo_build.rs");

const SKIP: &str = "WEFT_SKIP_EBPF";

fn main() {
    println!("cargo:rerun-if-env-changed={SKIP}");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (out, trace_out) = (
        out_dir.join("weft-ebpf.o"),
        out_dir.join("weft-oneliner-ebpf.o"),
    );
    if env::var_os(SKIP).is_some_and(|v| !v.is_empty() && v != "0") {
        println!("cargo:warning={SKIP} is set: building weft without its eBPF programs");
        fs::write(&out, b"").expect("write empty eBPF placeholder");
        fs::write(&trace_out, b"").expect("write empty eBPF placeholder");
        return;
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .parent()
        .expect("kernel/ is below the workspace root")
        .to_path_buf();
    for path in [
        "ebpf/src",
        "ebpf/Cargo.toml",
        "ebpf/Cargo.lock",
        "ebpf/cargo_build.rs",
        "abi/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    // A directory of its own: cargo would deadlock on the outer build's lock.
    let target_dir = root.join("target/ebpf");
    let mut cmd = ebpf_build_command(&root, &target_dir);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("failed to run {EBPF_CARGO} ({e}); run `cargo xtask setup` or set {SKIP}=1")
    });
    assert!(
        status.success(),
        "building the eBPF object failed ({status}); run `cargo xtask setup` or set {SKIP}=1"
    );
    for (object, embedded) in [
        (ebpf_object_path(&target_dir), &out),
        (ebpf_oneliner_object_path(&target_dir), &trace_out),
    ] {
        ebpf_strip_debug(&object, embedded)
            .unwrap_or_else(|e| panic!("{e}; run `cargo xtask setup` or set {SKIP}=1"));
    }
}
