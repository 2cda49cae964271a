//! `weft record`: syscalls and the other sources into a capture directory,
//! headless. The arguments become a plain [`RecordPlan`], which
//! `weft_recording::record` carries out.

use std::{
    io::{IsTerminal as _, Write as _},
    process::ExitCode,
};

use anyhow::Result;
use weft_kernel::tc::NetOptions;
use weft_recording::{
    command::Command,
    peers::PeerPlan,
    record::{Chosen, RecordPlan, Triggering, ns, record},
    recorder::Progress,
    trigger,
};

use crate::{
    cli::{CaptureArgs, FilterArgs, RecordArgs, TriggerArgs},
    pt_demand, pt_record, resolve,
};

/// Runs `weft record` until the duration ends, SIGINT or SIGTERM.
pub fn run(args: &RecordArgs) -> Result<ExitCode> {
    let command = resolve::command(&args.filter, false)?;
    let mut plan = plan(args, command.as_ref())?;
    // A status line where someone watches.
    if std::io::stderr().is_terminal() {
        plan.progress = Some(status_line);
    }
    let recorded = record(&plan, None, command);
    if plan.progress.is_some() {
        eprintln!();
    }
    eprint!("{}", recorded?);
    Ok(ExitCode::SUCCESS)
}

/// Redraws the status line: events, rate, losses, drain lag, size, time.
fn status_line(progress: &Progress) {
    let elapsed = progress.elapsed.as_secs_f64();
    let received = progress.received;
    let left = (progress.left).map_or_else(String::new, |left| {
        format!(", {:.0}s left", left.as_secs_f64())
    });
    let lag = match progress.lag_ns {
        0 => String::new(),
        ns => format!(", drain lag {:.1}ms", ns as f64 / 1e6),
    };
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "\r\x1b[Kweft record: {received} events ({:.1}k/s), lost {}{lag}, {:.1} MiB on disk, {elapsed:.0}s{left}",
        received as f64 / elapsed.max(1e-9) / 1e3,
        progress.lost,
        progress.disk_bytes as f64 / f64::from(1 << 20),
    );
    let _ = stderr.flush();
}

/// `sources` with `filter`, into a new capture `dir`, without limits,
/// triggers or metrics: the terminal UI's recording.
pub fn plain(
    sources: &[String],
    filter: &FilterArgs,
    capture: &CaptureArgs,
    dir: std::path::PathBuf,
    command: Option<&Command>,
) -> Result<RecordPlan> {
    let (options, drain_interval) = resolve::probe_options(filter, capture, command)?;
    Ok(RecordPlan {
        decode_pt: Some(pt_demand::decode),
        // The other sources take the syscalls' cgroup filter too.
        cgroup: options.filter.cgroup,
        ..RecordPlan::new(Chosen::named(sources)?, options, drain_interval, dir)
    })
}

/// What `weft record`'s arguments say.
fn plan(args: &RecordArgs, command: Option<&Command>) -> Result<RecordPlan> {
    let output = &args.output;
    let triggers = &output.triggers;
    Ok(RecordPlan {
        net: NetOptions {
            interfaces: args.interface.clone(),
            ports: args.port.clone(),
            addrs: args.addr.clone(),
            snaplen: args.snaplen,
        },
        app_group: args.app_group.clone(),
        stack_hz: args.stack_hz,
        append: output.append,
        duration: output.duration,
        triggers: Triggering {
            conditions: triggers.conditions.clone(),
            policy: trigger_policy(triggers),
            command: triggers.on_trigger.clone(),
            pt: (triggers.pt_on_trigger)
                .filter(|_| pt_record::on_trigger())
                .map(|duration| (duration, pt_demand::capture as _)),
        },
        metrics: args.metrics.map(|addr| (addr, args.metrics_window)),
        peer: args.peer_listen.map(|listen| PeerPlan {
            listen,
            secret: args.peer_secret.clone(),
            peers: args.peer.clone(),
            hops: args.peer_hops,
        }),
        ..plain(
            &args.sources,
            &args.filter,
            &args.capture,
            output.output.clone(),
            command,
        )?
    }
    .limited(output.max_disk, output.retain)
    .keeping_summaries(output.retain_summaries))
}

/// What `--keep` and `--max-triggers` say, in ns.
fn trigger_policy(args: &TriggerArgs) -> trigger::Policy {
    let (most, per) = args.max_triggers;
    trigger::Policy {
        before: ns(args.keep.0),
        after: ns(args.keep.1),
        limit: Some((most, ns(per))),
    }
}
