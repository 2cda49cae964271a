//! `weft stat`: the arguments become a plain [`StatPlan`], which
//! `weft_recording::stat` runs, printing to stdout.

use std::process::ExitCode;

use anyhow::{Result, bail};
use weft_recording::{
    command::Command,
    stat::{self, By, StatPlan},
};

use crate::{
    cli::{StatArgs, StatBy},
    resolve,
};

/// Runs `weft stat` until the duration ends, Ctrl-C or SIGTERM.
pub fn run(args: &StatArgs) -> Result<ExitCode> {
    let command = resolve::command(&args.filter, false)?;
    let plan = plan(args, command.as_ref())?;
    stat::run(&plan, command, &mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves names to numbers and checks that pids exist.
fn plan(args: &StatArgs, command: Option<&Command>) -> Result<StatPlan> {
    let (options, drain_interval) = resolve::probe_options(&args.filter, &args.capture, command)?;
    if args.output.interval.is_some_and(|i| i.is_zero()) {
        bail!("--interval must be greater than zero");
    }
    Ok(StatPlan {
        options,
        duration: args.output.duration,
        interval: args.output.interval,
        drain_interval,
        json: args.output.json,
        by: match (args.per_process, args.by) {
            (true, _) | (_, StatBy::Pid) => By::Pid,
            (_, StatBy::Syscall) => By::Syscall,
            (_, StatBy::Tid) => By::Tid,
            (_, StatBy::Comm) => By::Comm,
        },
        cost: args.cost,
    })
}
