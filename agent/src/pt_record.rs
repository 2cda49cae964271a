//! `weft pt record`: one Intel PT window (`weft_pt_capture`), taken as the
//! command line says, reported, and handed to a running recording.

use std::path::Path;
use std::process::ExitCode;

use weft_pt_capture::caps::{Caps, SYSFS, Unsupported};
use weft_pt_capture::take::{Options, Taken, Target, take};

use crate::cli::PtRecordArgs;

/// Exit status when the hardware cannot do what was asked.
const UNSUPPORTED: u8 = 3;

pub fn run(args: &PtRecordArgs) -> anyhow::Result<ExitCode> {
    let caps = match Caps::detect(Path::new(SYSFS)) {
        Err(absent @ Unsupported::Absent { .. }) => {
            eprintln!("weft: {absent}");
            return Ok(ExitCode::from(UNSUPPORTED));
        }
        other => other?,
    };
    report(&take(&caps, &options(args))?);
    // A recording that runs stores the capture's calls.
    if Path::new(weft_recording::live::client::SOCKET).exists() {
        match weft_recording::live::client::import(&args.output) {
            Ok(stored) => eprintln!("weft: {stored}"),
            Err(error) => eprintln!("weft: the calls are not in the live recording: {error:#}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--pt-on-trigger`: whether this CPU has PT; where it has none, says
/// so (triggers then keep their windows without PT).
pub fn on_trigger() -> bool {
    Caps::detect(Path::new(SYSFS))
        .inspect_err(|why| {
            eprintln!("weft: --pt-on-trigger: {why}; triggers keep their windows without PT");
        })
        .is_ok()
}

/// A trigger's capture: PT of process `pid` for `duration` into `output`,
/// with the defaults of `weft pt record`.
pub fn capture(pid: u32, duration: std::time::Duration, output: &Path) -> anyhow::Result<()> {
    let options = Options {
        duration,
        ..Options::new(Target::Pid(pid), output.to_owned())
    };
    report(&take(&Caps::detect(Path::new(SYSFS))?, &options)?);
    Ok(())
}

fn options(args: &PtRecordArgs) -> Options {
    let target = match (args.pid, &args.cgroup) {
        (Some(pid), _) => Target::Pid(pid),
        // clap requires one of the two.
        (None, cgroup) => Target::Cgroup(cgroup.clone().unwrap_or_default()),
    };
    Options {
        duration: args.duration,
        size: args.size,
        budget: args.budget,
        snapshot: args.snapshot,
        kernel: args.kernel,
        ..Options::new(target, args.output.clone())
    }
}

fn report(taken: &Taken) {
    for (cpu, bytes, truncated) in &taken.traces {
        let lost = if *truncated { ", truncated" } else { "" };
        eprintln!("weft: CPU {cpu}: {bytes} bytes of PT{lost}");
    }
    match &taken.switches {
        Ok((switches, lost)) => {
            eprintln!("weft: {switches} context switches on the traced CPUs, {lost} lost");
        }
        Err(error) => eprintln!(
            "weft: no context-switch sideband ({error}): decoding will take every stretch as the target's"
        ),
    }
    if taken.watchdog {
        eprintln!("weft: the watchdog stopped tracing at its deadline");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command, PtCommand};

    /// A trigger's capture takes `weft pt record`'s defaults from
    /// `Options::new`; the command line must say the same.
    #[test]
    fn the_command_line_defaults_are_the_captures() {
        let cli = Cli::try_parse_from(["weft", "pt", "record", "--pid", "7", "-o", "out"]).unwrap();
        let Some(Command::Pt(PtCommand::Record(args))) = cli.command else {
            panic!("not pt record: {cli:?}");
        };
        assert_eq!(options(&args), Options::new(Target::Pid(7), "out".into()));
    }
}
