//! Intel PT captures taken while `weft record` runs: when a trigger fires
//! (`--pt-on-trigger`), when the UI asks (`p`), or when `weft pt import`
//! hands one over. Each is decoded into calls that the recorder stores in
//! its `calls` source (`pt_calls.rs`).

use std::{path::Path, sync::mpsc::Sender, time::Duration};

use anyhow::Result;
use weft_capture::pt_calls::{Call, Decoded};
use weft_pt::calls::{Call as Step, name};
use weft_pt_capture::caps::{Caps, SYSFS};

/// A capture asked for by hand (the UI's `p`): PT of process `pid` for
/// `weft pt record`'s default window into a new directory of `dir`, on a
/// thread of its own, its calls then stored through `calls` (the recorder
/// says what it stored). Says what it started, or why it cannot.
pub fn start(pid: u32, dir: &Path, calls: &Sender<Decoded>) -> Result<String, String> {
    Caps::detect(Path::new(SYSFS)).map_err(|why| format!("no PT capture: {why}"))?;
    let output = dir.join(format!("pt-p-{pid}-{}", weft_store::now_ns()));
    let window = Duration::from_millis(200);
    let calls = calls.clone();
    std::thread::spawn(move || {
        if let Err(error) = capture(pid, window, &output, &calls) {
            eprintln!("weft: PT of process {pid}: {error:#}");
        }
    });
    Ok(format!(
        "capturing Intel PT of process {pid} for 200ms; its calls join `calls`"
    ))
}

/// Captures PT of process `pid` for `duration` into `output`, as `weft pt
/// record --pid` does, and hands its decoded calls to `to`: the recorder
/// stores them. A recorder that has stopped meanwhile leaves the capture
/// on disk only.
pub fn capture(
    pid: u32,
    duration: Duration,
    output: &Path,
    to: &Sender<Decoded>,
) -> weft_recording::error::Result<()> {
    crate::pt_record::capture(pid, duration, output).map_err(pt_error)?;
    let _ = to.send(decode(output)?);
    Ok(())
}

/// Decodes the `weft pt record` capture in `dir` into its calls.
pub fn decode(dir: &Path) -> weft_recording::error::Result<Decoded> {
    calls(dir).map_err(pt_error)
}

/// A PT error as the recorder reports it.
fn pt_error(error: impl Into<anyhow::Error>) -> weft_recording::error::Error {
    weft_recording::error::Error::Pt(format!("{:#}", error.into()))
}

fn calls(dir: &Path) -> Result<Decoded> {
    let mut calls = Vec::new();
    let errors = weft_pt_capture::decode::capture_calls(dir, &mut |pid, tid, image, steps| {
        let thread = (
            u32::try_from(pid).unwrap_or_default(),
            u32::try_from(tid).unwrap_or_default(),
        );
        calls.extend(steps.into_iter().filter_map(|step| match step {
            Step::Exit {
                depth,
                function,
                time,
                duration: Some(dur),
            } => Some(Call {
                time,
                dur,
                pid: thread.0,
                tid: thread.1,
                depth: u32::try_from(depth).unwrap_or(u32::MAX),
                func: name(image, function),
            }),
            _ => None,
        }));
        Ok(())
    })?;
    calls.sort_by_key(|c| c.time);
    Ok(Decoded {
        dir: dir.to_owned(),
        calls,
        errors,
        done: None,
    })
}
