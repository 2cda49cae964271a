//! One Intel PT window over the CPUs a process or cgroup may run on,
//! with its context switches, written to a new capture directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::caps::{Caps, SYSFS};
use crate::error::{Error, Result};
use crate::perf_event::PerfEvent;
use serde_json::json;
use weft_pt::time::TscClock;

use crate::window::{Request, WindowPlan, read_tsc_and_monotonic, window};
use weft_pt::perf_data::Switch;

use crate::dir::{Sidebands, save};
use crate::switches::Switches;

/// What to trace: the CPUs of one process, or of a cgroup's cpuset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    /// A cgroup v2 directory.
    Cgroup(PathBuf),
}

/// One capture to take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub target: Target,
    /// How long to trace.
    pub duration: Duration,
    /// PT buffer bytes per CPU.
    pub size: u64,
    /// PT buffer bytes across all CPUs at most.
    pub budget: u64,
    /// Overwrite the oldest trace when a buffer is full.
    pub snapshot: bool,
    /// Trace kernel code too.
    pub kernel: bool,
    /// The new directory to write.
    pub output: PathBuf,
}

impl Options {
    /// `weft pt record`'s defaults: 200 ms, 16 MiB per CPU, 512 MiB in all,
    /// user code only, stop when a buffer is full.
    pub fn new(target: Target, output: PathBuf) -> Self {
        Self {
            target,
            duration: Duration::from_millis(200),
            size: 16 << 20,
            budget: 512 << 20,
            snapshot: false,
            kernel: false,
            output,
        }
    }
}

/// What a capture took, for its report.
#[derive(Debug)]
pub struct Taken {
    /// Per CPU: bytes of PT, and whether the buffer filled.
    pub traces: Vec<(u32, usize, bool)>,
    /// Context switches recorded and lost, or why none could be.
    pub switches: Result<(usize, u64), String>,
    /// Whether the watchdog stopped tracing at its deadline.
    pub watchdog: bool,
}

/// Plans, takes and writes one capture.
pub fn take(caps: &Caps, options: &Options) -> Result<Taken> {
    let cpus = match &options.target {
        Target::Pid(pid) => affinity(*pid)?,
        Target::Cgroup(cgroup) => cgroup_cpus(cgroup)?,
    };
    let plan = WindowPlan::new(
        caps,
        &Request {
            cpus,
            duration: options.duration,
            size: options.size,
            budget: options.budget,
            snapshot: options.snapshot,
            kernel: options.kernel,
        },
    )?;
    // A capture that cannot be written is not taken.
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&options.output)
        .map_err(Error::file("creating", &options.output))?;
    let pmu = Path::new(SYSFS).join("intel_pt");
    let events = plan
        .cpus
        .iter()
        .map(|&cpu| {
            let event = PerfEvent::open(&pmu, &plan, cpu).map_err(|error| Error::Io {
                doing: format!("opening intel_pt on CPU {cpu}"),
                error,
            })?;
            Ok((cpu, event))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut recording = Switches::start(&plan.cpus);
    let first = read_tsc_and_monotonic();
    let window = window(&plan, events, |duration| {
        // The switch rings are drained while PT runs.
        let end = Instant::now() + duration;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            if let Ok(switches) = recording.as_mut() {
                switches.drain();
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    })
    .map_err(|error| Error::Io {
        doing: "tracing the window".into(),
        error,
    })?;
    let clock = first.zip(read_tsc_and_monotonic()).map(|(a, b)| TscClock {
        tsc: [a.0, b.0],
        ns: [a.1, b.1],
    });
    let switches = recording.map(Switches::finish);
    // The traced processes, as they are at the end of the window.
    let processes = match &options.target {
        Target::Pid(pid) => vec![*pid],
        Target::Cgroup(cgroup) => cgroup_processes(cgroup),
    };
    let threads = thread_names(&processes, switches.iter().flat_map(|(s, _)| s));
    let maps: Vec<(u32, Vec<u8>)> = processes
        .iter()
        .filter_map(|&pid| Some((pid, fs::read(format!("/proc/{pid}/maps")).ok()?)))
        .collect();
    let build_ids = build_ids(&maps);
    save(
        &options.output,
        &plan,
        &window,
        &Sidebands {
            clock,
            maps: &maps,
            build_ids: &build_ids,
            switches: switches
                .as_ref()
                .ok()
                .map(|(s, lost)| (s.as_slice(), *lost)),
            threads: &threads,
        },
        &target_json(&options.target),
    )?;
    Ok(Taken {
        traces: (window.traces.iter())
            .map(|(cpu, aux)| (*cpu, aux.bytes.len(), aux.truncated))
            .collect(),
        switches: switches
            .map(|(s, lost)| (s.len(), lost))
            .map_err(|error| format!("{error:#}")),
        watchdog: window.watchdog,
    })
}

fn target_json(target: &Target) -> serde_json::Value {
    match target {
        Target::Pid(pid) => json!({ "pid": pid }),
        Target::Cgroup(cgroup) => json!({ "cgroup": cgroup }),
    }
}

/// The CPUs process `pid` may run on.
fn affinity(pid: u32) -> Result<Vec<u32>> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| Error::Refused(format!("--pid {pid}: out of range")))?;
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(pid, size_of::<libc::cpu_set_t>(), &raw mut set) } != 0 {
        return Err(Error::Io {
            doing: format!("no CPUs for process {pid}"),
            error: std::io::Error::last_os_error(),
        });
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: CPU_ISSET reads the set within CPU_SETSIZE.
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu as usize, &set) })
        .collect())
}

/// The CPUs of a cgroup v2 directory's effective cpuset.
fn cgroup_cpus(dir: &Path) -> Result<Vec<u32>> {
    let path = dir.join("cpuset.cpus.effective");
    let text = fs::read_to_string(&path).map_err(Error::file("reading", &path))?;
    cpu_list(text.trim())
        .ok_or_else(|| Error::Damaged(format!("{}: {text:?} is not a CPU list", path.display())))
}

/// A kernel CPU list: `0-3,8,10-11`; `None` where it is not one.
fn cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
        // A range that runs backwards is not one.
        if first > last {
            return None;
        }
        cpus.extend(first..=last);
    }
    Some(cpus)
}

/// The build-id of each executable file in the processes' `maps` (hex;
/// `None` for a file without one), each file read once however many map
/// it, now: decoding later checks that the files are the builds that ran.
fn build_ids(maps: &[(u32, Vec<u8>)]) -> BTreeMap<String, Option<String>> {
    let files: BTreeSet<String> = maps
        .iter()
        .flat_map(|(_, text)| {
            weft_pt::image::executable_mappings(&String::from_utf8_lossy(text)).unwrap_or_default()
        })
        .map(|m| m.path)
        .collect();
    files
        .into_iter()
        .filter_map(|path| {
            let bytes = weft_symbols::read_file(Path::new(&path)).ok()?;
            let id = weft_pt::image::build_id(&path, &bytes).ok()?;
            Some((path, id))
        })
        .collect()
}

/// The processes of a cgroup v2 directory (none where it cannot be read).
fn cgroup_processes(dir: &Path) -> Vec<u32> {
    let text = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The names of the threads of `pids` among `switches`, while they live.
fn thread_names<'a>(
    pids: &[u32],
    switches: impl Iterator<Item = &'a Switch>,
) -> BTreeMap<i32, String> {
    let tids: BTreeSet<(i32, i32)> = switches
        .filter(|s| pids.contains(&s.pid.cast_unsigned()))
        .map(|s| (s.pid, s.tid))
        .collect();
    tids.into_iter()
        .filter_map(|(pid, tid)| {
            let comm = fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            Some((tid, comm.trim_end().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_named_once_each_and_only_the_traced_process_s() {
        let pid = std::process::id();
        let me = pid.cast_signed();
        let switch = |pid, tid| Switch {
            time: 0,
            cpu: 0,
            pid,
            tid,
        };
        let switches = [switch(me, me), switch(1, 1), switch(me, me)];
        let names = thread_names(&[pid], switches.iter());
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
        assert_eq!(names, BTreeMap::from([(me, comm.trim_end().to_owned())]));
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-3,8,10-11").unwrap(), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(cpu_list("5").unwrap(), [5]);
        assert!(cpu_list("").unwrap().is_empty());
        assert!(cpu_list("3-1").is_none());
        assert!(cpu_list("x").is_none());
    }

    #[test]
    fn this_process_may_run_on_some_cpu() {
        let cpus = affinity(std::process::id()).unwrap();
        assert!(!cpus.is_empty());
        let err = affinity(u32::MAX >> 1).unwrap_err().to_string();
        assert!(err.contains("no CPUs for process"), "{err}");
    }

    #[test]
    fn the_build_ids_of_a_process_name_its_executable_files() {
        let ids = build_ids(&[(std::process::id(), fs::read("/proc/self/maps").unwrap())]);
        let exe = std::env::current_exe().unwrap().display().to_string();
        let id = ids[&exe].as_deref().unwrap_or_else(|| panic!("{ids:?}"));
        assert_eq!(id.len(), 40, "a 160-bit GNU build-id: {id}");
        assert!(ids.keys().all(|path| path.starts_with('/')), "{ids:?}");
    }
}
