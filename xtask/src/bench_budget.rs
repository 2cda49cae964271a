//! `cargo xtask bench budget`: the disk budget against a trigger that
//! matches all the time, for a long flood (issue 48's soak). `weft record
//! --max-disk` keeps a window around every getppid of the one-core loop
//! (each firing's window capped, pins held to their share of the budget);
//! the bench samples the capture's disk use twice a second and fails if it
//! ever passes the budget and one record segment, the promise of
//! docs/format.md. It prints the peak, the firings, the capped windows and
//! the pins the budget released. The summaries of what the budget deletes
//! are kept (`--retain-summaries`, aged into coarser buckets as the flood
//! goes on): it prints their log's size, and fails unless a count over the
//! whole capture, from the records held and those summaries, is every
//! record received.

use std::{
    os::unix::fs::MetadataExt as _,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::bench_loop::{Tracer, build};

#[derive(clap::Args)]
pub struct Options {
    /// Seconds of flood (the soak is 600: ten minutes).
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// The recording's `--max-disk`, in MiB.
    #[arg(long, default_value_t = 256)]
    max_disk_mib: u64,
    /// The recording's `--retain-summaries`.
    #[arg(long, default_value = "1h")]
    retain_summaries: String,
}

pub fn run(options: &Options) -> Result<()> {
    let bins = build()?;
    let dir = std::env::temp_dir().join(format!("weft-bench-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let budget = options.max_disk_mib << 20;
    let argv = [
        bins.weft.clone(),
        "record".into(),
        "-o".into(),
        dir.display().to_string(),
        "--max-disk".into(),
        format!("{}MiB", options.max_disk_mib),
        "--retain-summaries".into(),
        options.retain_summaries.clone(),
        "--keep=-2s..+2s".into(),
        "--max-triggers".into(),
        "1000/1m".into(),
        "--trigger".into(),
        r#"syscalls where name = "getppid""#.into(),
    ];
    let tracer = Tracer::start(&argv, "weft: recording")?;
    let mut flood = Command::new("taskset")
        .args(["-c", "0", &bins.syscall_loop, "getppid", "for"])
        .arg(options.seconds.to_string())
        .stdout(Stdio::null())
        .spawn()
        .context("failed to start the loop")?;
    let mut peak = 0;
    while flood.try_wait()?.is_none() {
        peak = peak.max(disk_use(&dir));
        std::thread::sleep(Duration::from_millis(500));
    }
    tracer.interrupt()?;
    peak = peak.max(disk_use(&dir));
    let segment = segment_bytes(&dir)?;
    let text = std::fs::read_to_string(dir.join("weft.json"))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)?;
    let session = &metadata["sessions"][0];
    let rule = &session["triggers"]["rules"][1];
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!(
        "budget: {}s of flood, --max-disk {} MiB, segment {:.0} MiB: peak on disk {:.1} MiB \
         ({:.3} of budget + segment); fired {}, capped {}, merged {}, pins released {}",
        options.seconds,
        options.max_disk_mib,
        mib(segment),
        mib(peak),
        peak as f64 / (budget + segment) as f64,
        rule["fired"],
        rule["capped"],
        rule["merged"],
        session["pins_released"],
    );
    let received = session["lost"]["syscalls"]["received"].as_u64();
    let (counted, took) = count_all(&bins.weft, &dir)?;
    println!(
        "budget: summaries kept {}: rollups.log {:.2} MiB; `syscalls | count` over the whole \
         capture {counted} in {:.1} ms (received {})",
        options.retain_summaries,
        mib(std::fs::metadata(dir.join("rollups.log")).map_or(0, |m| m.len())),
        took.as_secs_f64() * 1e3,
        received.unwrap_or(0),
    );
    let _ = std::fs::remove_dir_all(&dir);
    if peak > budget + segment {
        bail!("the capture passed its budget and one segment");
    }
    if Some(counted) != received {
        bail!("the records held and the summaries kept do not count every record received");
    }
    Ok(())
}

/// `weft query --json DIR 'syscalls | count'`, and how long it took.
fn count_all(weft: &str, dir: &Path) -> Result<(u64, Duration)> {
    let started = std::time::Instant::now();
    let out = Command::new(weft)
        .args(["query", "--json"])
        .arg(dir)
        .arg("syscalls | count")
        .output()
        .context("failed to run weft query")?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!("weft query: {}", String::from_utf8_lossy(&out.stderr));
    }
    let row: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let count = row["count"]
        .as_u64()
        .context("no count in weft query's answer")?;
    Ok((count, took))
}

/// Bytes the files of `dir` take on disk (holes not counted).
fn disk_use(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len().min(m.blocks() * 512))
        .sum()
}

/// One record segment's bytes, from the store's `meta`.
fn segment_bytes(dir: &Path) -> Result<u64> {
    let meta = std::fs::read_to_string(dir.join("meta"))?;
    let field = |name: &str| -> Result<u64> {
        meta.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .with_context(|| format!("meta has no {name}"))
    };
    Ok(field("block_size ")? * field("blocks_per_segment ")?)
}
