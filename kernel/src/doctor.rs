//! What the running kernel and this process offer weft (`weft doctor`),
//! each check with its outcome and what to do about it. The decisive check
//! loads and attaches the syscall probe for real (then detaches it).

use std::{fs, path::Path, time::Duration};

use crate::{
    ebpf,
    events::{self, EventProbe},
    source::SourceHooks,
    syscall::{AttachPoints, Filter, Options, SyscallProbe},
    tc,
};

/// One line of the report.
pub struct Check {
    pub what: String,
    /// `None`: could not tell.
    pub ok: Option<bool>,
    pub detail: String,
}

/// Every check, in the report's order, with the event sources `sources`.
pub fn checks(sources: &[&'static SourceHooks]) -> Vec<Check> {
    let mut checks = Vec::new();
    let release = read("/proc/sys/kernel/osrelease");
    checks.push(Check {
        what: "kernel".into(),
        ok: Some(true),
        detail: release.clone(),
    });
    let privileged = ebpf::check_privileges();
    checks.push(Check {
        what: "privileges".into(),
        ok: Some(privileged.is_ok()),
        detail: privileged.as_ref().map_or_else(
            |e| format!("{e:#}"),
            |()| "CAP_BPF+CAP_PERFMON or root".into(),
        ),
    });
    checks.push(present(
        "BTF",
        "/sys/kernel/btf/vmlinux",
        "kernel type info for fentry and BTF maps",
    ));
    let tracefs = ebpf::tracefs();
    checks.push(Check {
        what: "tracefs".into(),
        ok: Some(tracefs.is_ok()),
        detail: tracefs
            .as_ref()
            .map_or_else(|e| format!("{e:#}"), |p| p.display().to_string()),
    });
    if let Ok(tracefs) = &tracefs {
        for (what, event) in [
            ("raw syscall tracepoints", "raw_syscalls/sys_enter"),
            ("per-syscall tracepoints", "syscalls/sys_enter_getppid"),
        ] {
            let path = tracefs.join("events").join(event);
            checks.push(present(what, &path.display().to_string(), event));
        }
    }
    let config = kernel_config(&release);
    for option in [
        "CONFIG_BPF_SYSCALL",
        "CONFIG_DEBUG_INFO_BTF",
        "CONFIG_KPROBES",
    ] {
        let set = config
            .as_ref()
            .map(|c| c.lines().any(|l| l == format!("{option}=y")));
        checks.push(Check {
            what: option.into(),
            ok: set,
            detail: match set {
                Some(true) => "y".into(),
                Some(false) => "not set".into(),
                None => "no /boot/config of this kernel to read".into(),
            },
        });
    }
    if privileged.is_ok() {
        checks.push(load_probe());
    }
    if let Ok(tracefs) = &tracefs {
        checks.extend(source_checks(sources, tracefs, privileged.is_ok()));
    }
    checks
}

/// Whether weft can trace here: the syscall probe loaded and attached.
pub fn usable(checks: &[Check]) -> bool {
    checks
        .iter()
        .any(|c| c.what == SYSCALL_PROBE && c.ok == Some(true))
}

/// The check that loads the syscall probe.
const SYSCALL_PROBE: &str = "syscall probe";

fn read(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn present(what: &str, path: &str, why: &str) -> Check {
    let ok = Path::new(path).exists();
    Check {
        what: what.into(),
        ok: Some(ok),
        detail: if ok {
            why.to_owned()
        } else {
            format!("{path} is missing")
        },
    }
}

/// The kernel's build configuration, where Debian keeps it.
fn kernel_config(release: &str) -> Option<String> {
    fs::read_to_string(format!("/boot/config-{release}")).ok()
}

/// Loads the syscall probe with one small ring per CPU, attaches it and
/// detaches it: task storage, ring buffers, maps of maps and raw
/// tracepoints all have to work for this to pass.
fn load_probe() -> Check {
    let options = Options {
        filter: Filter {
            min_duration: Duration::from_secs(3600),
            ..Filter::default()
        },
        attach: AttachPoints::Raw,
        ring_bytes: 1 << 16,
    };
    let outcome = SyscallProbe::load(&options).and_then(|mut probe| {
        let described = probe.describe();
        probe.detach()?;
        Ok(described)
    });
    Check {
        what: SYSCALL_PROBE.into(),
        ok: Some(outcome.is_ok()),
        detail: outcome.unwrap_or_else(|e| format!("{e:#}")),
    }
}

/// One line per event source: can it attach here, what does it lack; and,
/// with privileges, a real load of the tracepoint sources' programs.
fn source_checks(sources: &[&'static SourceHooks], tracefs: &Path, privileged: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut loadable = Vec::new();
    for &hooks in sources {
        let available = hooks.availability(tracefs);
        let ok = available.missing.is_none();
        let detail = if hooks.tc {
            tc::describe_attach().to_owned()
        } else if hooks.sampled {
            "samples every CPU with a perf cpu-clock event".to_owned()
        } else {
            let first = available
                .missing
                .unwrap_or_else(|| "tracepoints present".into());
            std::iter::once(first)
                .chain(available.lacks)
                .collect::<Vec<_>>()
                .join("; ")
        };
        if ok && !hooks.tc {
            loadable.push(hooks);
        }
        checks.push(Check {
            what: format!("source {}", hooks.name),
            ok: Some(ok),
            detail,
        });
    }
    if privileged && !loadable.is_empty() {
        let outcome =
            EventProbe::load(&loadable, &events::Filter::default(), 1 << 16).map(|mut probe| {
                probe.detach();
            });
        let names: Vec<&str> = loadable.iter().map(|s| s.name).collect();
        checks.push(Check {
            what: "event sources load".into(),
            ok: Some(outcome.is_ok()),
            detail: outcome.map_or_else(|e| format!("{e:#}"), |()| names.join(", ")),
        });
    }
    checks
}
