//! `weft`: eBPF-first observability for Linux. This file only parses arguments
//! and maps the outcome to an exit code: 0 ok, 2 error.

mod cli;
mod diff;
mod doctor;
mod export;
mod info;
mod manual;
mod pt;
mod pt_demand;
mod pt_record;
mod query;
mod record;
mod resolve;
mod sources;
mod stat;
mod trace;
mod tui;

use std::{
    io::Write as _,
    process::ExitCode,
    sync::atomic::{AtomicBool, Ordering},
};

use clap::Parser as _;

/// Set by `weft trace --no-warnings`: warnings are not printed.
static NO_WARNINGS: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    // What the library crates say (their warnings, and notes such as a
    // replay's rate) as they wrote it, and aya's and the eBPF programs'
    // warnings (aya-log) with their origin; RUST_LOG overrides.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,weft=info"))
        .format(|out, record| {
            if record.level() == log::Level::Warn && NO_WARNINGS.load(Ordering::Relaxed) {
                Ok(())
            } else if record.target().starts_with("weft") {
                writeln!(out, "{}", record.args())
            } else {
                writeln!(
                    out,
                    "weft: {} {}: {}",
                    record.level(),
                    record.target(),
                    record.args()
                )
            }
        })
        .init();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // --help and --version.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("weft: {} (see --help)", one_line(&error));
            return ExitCode::from(2);
        }
    };
    // `weft` alone is `weft tui` with its defaults.
    let command = cli.command.unwrap_or_else(|| {
        cli::Cli::parse_from(["weft", "tui"])
            .command
            .expect("given")
    });
    let result = match &command {
        cli::Command::Tui(args) => tui::run(args),
        cli::Command::Trigger(args) => weft_recording::live::client::trigger(
            args.dir.as_deref(),
            args.note.as_deref().unwrap_or_default(),
        )
        .map(|()| {
            eprintln!("weft: triggered");
            std::process::ExitCode::SUCCESS
        })
        .map_err(anyhow::Error::from),
        cli::Command::Extract(args) => extract(args).map(|report| {
            for line in report.lines() {
                eprintln!("weft: {line}");
            }
            std::process::ExitCode::SUCCESS
        }),
        cli::Command::Stat(args) => stat::run(args),
        cli::Command::Record(args) => record::run(args),
        cli::Command::Info(args) => info::run(args),
        cli::Command::Check(args) => info::check(args),
        cli::Command::Sources(args) => Ok(sources::run(args)),
        cli::Command::Doctor(args) => Ok(doctor::run(args)),
        cli::Command::Query(args) => query::run(args),
        cli::Command::Diff(args) => diff::run(args),
        cli::Command::Export(args) => export::run(args),
        cli::Command::Trace(args) => trace::run(args),
        cli::Command::Pt(command) => pt::run(command),
        cli::Command::Completions(args) => Ok(manual::completions(args.shell)),
        cli::Command::Man(args) => manual::man_pages(&args.dir),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("weft: {error:#}");
            ExitCode::from(exit_status(&error))
        }
    }
}

/// The exit status of a failed command (docs/errors.md): 77 (sysexits'
/// `EX_NOPERM`) without the privileges to trace, 3 where the kernel refused
/// what weft asked of it, 2 for everything else, bad input first.
/// `weft extract`: one capture's firing, or a traveled firing's windows
/// across a fleet's captures.
fn extract(args: &cli::ExtractArgs) -> anyhow::Result<String> {
    use weft_capture::extract;
    match (&args.dir, args.trigger, &args.firing) {
        (Some(dir), Some(trigger), None) => Ok(extract::extract(
            dir,
            trigger,
            &args.output,
            args.skip_damaged,
        )?),
        (None, None, Some(id)) if !args.fleet.is_empty() => {
            let dirs: Vec<&std::path::Path> =
                args.fleet.iter().map(std::path::PathBuf::as_path).collect();
            Ok(extract::extract_fleet(
                &dirs,
                id,
                &args.output,
                args.skip_damaged,
            )?)
        }
        _ => anyhow::bail!("give DIR --trigger N, or --fleet DIR,... --firing ID"),
    }
}

fn exit_status(error: &anyhow::Error) -> u8 {
    // The kernel's error, whether it came straight from the kernel crate or
    // through a recording's.
    let kernel = error.chain().find_map(|e| {
        (e.downcast_ref::<weft_kernel::error::Error>())
            .or_else(|| e.downcast_ref::<weft_recording::error::Error>()?.kernel())
    });
    match kernel {
        Some(kernel) if kernel.needs_root() => 77,
        Some(kernel) if kernel.kernel_refused() => 3,
        _ => 2,
    }
}

/// A command-line error in one line, like every other weft error (--help
/// has the details): clap's message, which lists of missing arguments
/// continue on indented lines, then its tips ("a similar argument exists:
/// '--pid'"); not the usage or the pointer to --help.
fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let mut paragraphs = text.split("\n\n").map(|paragraph| {
        let lines: Vec<&str> = paragraph.lines().map(str::trim).collect();
        lines.join(" ")
    });
    let mut line = paragraphs.next().unwrap_or_default();
    for tip in paragraphs.filter(|p| p.starts_with("tip:")) {
        line.push_str("; ");
        line.push_str(&tip);
    }
    line.trim_start_matches("error: ").to_owned()
}

#[cfg(test)]
mod tests {
    use super::exit_status;
    use weft_kernel::error::Error as KernelError;

    /// Privileges and the kernel's refusals keep their statuses through
    /// any context: the binary's own, or a recording's error around the
    /// kernel's.
    #[test]
    fn the_exit_status_finds_the_kernel_s_error_under_any_context() {
        let root = anyhow::Error::from(KernelError::NeedsRoot("needs root")).context("weft stat");
        assert_eq!(exit_status(&root), 77);
        let refused: weft_kernel::error::Error = aya::programs::ProgramError::NotLoaded.into();
        let recording = weft_recording::error::Error::from(refused).within("failed to attach");
        assert_eq!(
            exit_status(&anyhow::Error::from(recording).context("weft record")),
            3
        );
        assert_eq!(exit_status(&anyhow::anyhow!("--pid 0: no such process")), 2);
    }
}
