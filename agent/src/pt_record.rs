//! `weft pt record`: one Intel PT window over the CPUs a process or cgroup
//! may run on, written to a new directory: `cpuN.pt` per CPU (raw PT, for
//! `weft pt dump`), `capture.json` (what was traced and how, with the clock
//! parameters the decoder needs) and `maps-PID`, the memory map of each
//! traced process (the process, or those of the cgroup). `weft pt
//! flow|calls DIR` decode the directory whole ([`load`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::json;
use weft_pt::caps::{Caps, SYSFS, Unsupported};
use weft_pt::capture::perf::PerfEvent;
use weft_pt::capture::{Plan, Request, TscClock, Window, read_tsc_and_monotonic, window};
use weft_pt::perf::Switch;

use crate::cli::PtRecordArgs;
use crate::pt_sideband::Sideband;

/// Exit status when the hardware cannot do what was asked.
const UNSUPPORTED: u8 = 3;

pub fn record(args: &PtRecordArgs) -> anyhow::Result<ExitCode> {
    let caps = match Caps::detect(Path::new(SYSFS)) {
        Err(absent @ Unsupported::Absent { .. }) => {
            eprintln!("weft: {absent}");
            return Ok(ExitCode::from(UNSUPPORTED));
        }
        other => other?,
    };
    take(&caps, args)?;
    // A recording that runs stores the capture's calls.
    if Path::new(crate::live::client::SOCKET).exists() {
        match crate::live::client::import(&args.output) {
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
    use clap::{Args as _, FromArgMatches as _};
    // `weft pt record`'s own defaults for everything else.
    let (pid, duration) = (pid.to_string(), format!("{}ms", duration.as_millis()));
    let command = PtRecordArgs::augment_args(clap::Command::new("--pt-on-trigger"));
    let matches = command.try_get_matches_from(
        [
            "--pt-on-trigger",
            "--pid",
            &pid,
            "--duration",
            &duration,
            "--output",
        ]
        .map(std::ffi::OsStr::new)
        .into_iter()
        .chain([output.as_os_str()]),
    )?;
    let args = PtRecordArgs::from_arg_matches(&matches)?;
    take(&Caps::detect(Path::new(SYSFS))?, &args)
}

/// Plans, takes and writes one capture.
fn take(caps: &Caps, args: &PtRecordArgs) -> anyhow::Result<()> {
    let cpus = match (args.pid, &args.cgroup) {
        (Some(pid), _) => affinity(pid)?,
        (None, Some(cgroup)) => cgroup_cpus(cgroup)?,
        (None, None) => bail!("give --pid or --cgroup"),
    };
    let plan = Plan::new(
        caps,
        &Request {
            cpus,
            duration: args.duration,
            size: args.size,
            budget: args.budget,
            snapshot: args.snapshot,
            kernel: args.kernel,
        },
    )?;
    // A capture that cannot be written is not taken.
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let pmu = Path::new(SYSFS).join("intel_pt");
    let events = plan
        .cpus
        .iter()
        .map(|&cpu| {
            let event = PerfEvent::open(&pmu, &plan, cpu)
                .with_context(|| format!("opening intel_pt on CPU {cpu}"))?;
            Ok((cpu, event))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut sideband = Sideband::start(&plan.cpus);
    let first = read_tsc_and_monotonic();
    let window = window(&plan, events, |duration| {
        // The switch rings are drained while PT runs.
        let end = std::time::Instant::now() + duration;
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            sideband.as_mut().map(Sideband::drain);
            std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
        }
    })?;
    let clock = first.zip(read_tsc_and_monotonic()).map(|(a, b)| TscClock {
        tsc: [a.0, b.0],
        ns: [a.1, b.1],
    });
    let switches = sideband.map(Sideband::finish);
    // The traced processes, as they are at the end of the window.
    let processes = match (args.pid, &args.cgroup) {
        (Some(pid), _) => vec![pid],
        (None, Some(cgroup)) => cgroup_processes(cgroup),
        (None, None) => Vec::new(),
    };
    let threads = thread_names(&processes, switches.iter().flat_map(|(s, _)| s));
    let maps: Vec<(u32, Vec<u8>)> = processes
        .iter()
        .filter_map(|&pid| Some((pid, fs::read(format!("/proc/{pid}/maps")).ok()?)))
        .collect();
    let build_ids = build_ids(&maps);
    save(
        &args.output,
        &plan,
        &window,
        &Sidebands {
            clock,
            maps: &maps,
            build_ids: &build_ids,
            switches: switches.as_ref().map(|(s, lost)| (s.as_slice(), *lost)),
            threads: &threads,
        },
        &target(args),
    )?;
    for (cpu, aux) in &window.traces {
        let lost = if aux.truncated { ", truncated" } else { "" };
        eprintln!("weft: CPU {cpu}: {} bytes of PT{lost}", aux.bytes.len());
    }
    if let Some((switches, lost)) = &switches {
        eprintln!(
            "weft: {} context switches on the traced CPUs, {lost} lost",
            switches.len()
        );
    }
    if window.watchdog {
        eprintln!("weft: the watchdog stopped tracing at its deadline");
    }
    Ok(())
}

fn target(args: &PtRecordArgs) -> serde_json::Value {
    match (args.pid, &args.cgroup) {
        (Some(pid), _) => json!({ "pid": pid }),
        (None, cgroup) => json!({ "cgroup": cgroup }),
    }
}

/// The CPUs process `pid` may run on.
fn affinity(pid: u32) -> anyhow::Result<Vec<u32>> {
    let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(pid, size_of::<libc::cpu_set_t>(), &raw mut set) } != 0 {
        let err = std::io::Error::last_os_error();
        bail!("no CPUs for process {pid}: {err}");
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: CPU_ISSET reads the set within CPU_SETSIZE.
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu as usize, &set) })
        .collect())
}

/// The CPUs of a cgroup v2 directory's effective cpuset.
fn cgroup_cpus(dir: &Path) -> anyhow::Result<Vec<u32>> {
    let path = dir.join("cpuset.cpus.effective");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    cpu_list(text.trim()).with_context(|| format!("{}: {text:?} is not a CPU list", path.display()))
}

/// A kernel CPU list: `0-3,8,10-11`.
fn cpu_list(text: &str) -> anyhow::Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last): (u32, u32) = (first.parse()?, last.parse()?);
        if first > last {
            bail!("{part}: the range runs backwards");
        }
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

/// What a capture keeps besides the trace: how its TSC maps to
/// `CLOCK_MONOTONIC`, the process's maps, and the context switches on its
/// CPUs (with how many were lost).
struct Sidebands<'a> {
    clock: Option<TscClock>,
    /// Each traced process's memory map.
    maps: &'a [(u32, Vec<u8>)],
    /// The build-id of each executable file in `maps`.
    build_ids: &'a BTreeMap<String, Option<String>>,
    switches: Option<(&'a [Switch], u64)>,
    /// The names of the traced process's threads that ran.
    threads: &'a BTreeMap<i32, String>,
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
            let bytes = fs::read(&path).ok()?;
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

/// Write the capture into `dir`, every file new and mode 0600.
fn save(
    dir: &Path,
    plan: &Plan,
    window: &Window,
    sidebands: &Sidebands,
    target: &serde_json::Value,
) -> anyhow::Result<()> {
    let Sidebands {
        clock,
        maps,
        build_ids,
        switches,
        threads,
    } = *sidebands;
    let mut cpus = Vec::new();
    for (cpu, aux) in &window.traces {
        let file = format!("cpu{cpu}.pt");
        write_new(&dir.join(&file), &aux.bytes)?;
        cpus.push(json!({
            "cpu": cpu, "file": file, "bytes": aux.bytes.len(), "truncated": aux.truncated,
        }));
    }
    let mut maps_files = serde_json::Map::new();
    for (pid, text) in maps {
        let file = format!("maps-{pid}");
        write_new(&dir.join(&file), text)?;
        maps_files.insert(pid.to_string(), file.into());
    }
    if let Some((switches, _)) = switches {
        write_new(
            &dir.join("switches"),
            crate::pt_sideband::to_lines(switches).as_bytes(),
        )?;
    }
    let fields: serde_json::Map<String, serde_json::Value> = plan
        .fields
        .iter()
        .map(|&(name, value)| (name.to_string(), value.into()))
        .collect();
    let (eax, ebx) = ctc_ratio();
    let meta = json!({
        "version": 1,
        "target": target,
        "cpus": cpus,
        "fields": fields,
        "aux_bytes_per_cpu": plan.aux_bytes,
        "snapshot": plan.snapshot,
        "kernel": plan.kernel,
        "duration_ns": plan.duration.as_nanos() as u64,
        "traced_ns": window.traced_for.as_nanos() as u64,
        "watchdog_stopped_it": window.watchdog,
        "cpuid_0x15": { "eax": eax, "ebx": ebx },
        // TSC and CLOCK_MONOTONIC read together before and after the window.
        "clock": clock.map(|c| json!({ "tsc": c.tsc, "monotonic_ns": c.ns })),
        "maps": maps_files,
        "build_ids": build_ids,
        "switches": switches.map(|(s, lost)| json!({ "file": "switches", "records": s.len(), "lost": lost })),
        "threads": threads,
    });
    let text = serde_json::to_string_pretty(&meta)?;
    write_new(&dir.join("capture.json"), text.as_bytes())
}

/// CPUID leaf 0x15 (TSC per crystal-clock tick, for MTC packets): what
/// `weft pt dump --cpuid-0x15.eax/ebx` want.
fn ctc_ratio() -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        // Leaf 0 says how far the leaves go.
        if std::arch::x86_64::__cpuid(0).eax >= 0x15 {
            let leaf = std::arch::x86_64::__cpuid(0x15);
            return (leaf.eax, leaf.ebx);
        }
    }
    (0, 0)
}

/// What decoding a capture directory needs from it.
#[derive(Debug)]
pub struct Saved {
    /// Each CPU's trace file.
    pub traces: Vec<(u32, PathBuf)>,
    /// The memory map of each process whose code the capture kept.
    pub maps: Vec<(i32, PathBuf)>,
    /// log2 of the crystal-clock ticks between MTC packets.
    pub mtc_period: u8,
    /// CPUID leaf 0x15 EAX and EBX.
    pub cpuid_0x15: (u32, u32),
    /// How the trace's TSC becomes `CLOCK_MONOTONIC` ns.
    pub clock: Option<TscClock>,
    /// The traced process, when there was one.
    pub pid: Option<i32>,
    /// The context switches on the traced CPUs, by CPU and time.
    pub switches: Vec<Switch>,
    /// The names of the traced process's threads, by thread id.
    pub threads: HashMap<i32, String>,
    /// The build-id each executable file of `maps` had at capture time
    /// (`None`: it had none).
    pub build_ids: HashMap<String, Option<String>>,
}

/// Reads the `capture.json` of a capture directory.
pub fn load(dir: &Path) -> anyhow::Result<Saved> {
    let path = dir.join("capture.json");
    let text = fs::read(&path).with_context(|| {
        format!(
            "{}: not a `weft pt record` capture (no capture.json)",
            dir.display()
        )
    })?;
    let meta: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| path.display().to_string())?;
    let at = |what: &str| format!("{}: {what}", path.display());
    if meta["version"] != 1 {
        bail!(at(&format!(
            "version {} is not one weft reads (1)",
            meta["version"]
        )));
    }
    let number = |value: &serde_json::Value, what: &str| {
        value
            .as_u64()
            .with_context(|| at(&format!("{what} is not a number")))
    };
    let mut traces = Vec::new();
    for (i, cpu) in meta["cpus"].as_array().into_iter().flatten().enumerate() {
        let file = cpu["file"]
            .as_str()
            .filter(|f| !f.contains('/'))
            .with_context(|| at(&format!("cpus[{i}].file is not a file name")))?;
        let number = u32::try_from(number(&cpu["cpu"], &format!("cpus[{i}].cpu"))?)?;
        traces.push((number, dir.join(file)));
    }
    let clock = match &meta["clock"] {
        serde_json::Value::Null => None,
        clock => {
            let pair = |key: &str| -> anyhow::Result<[u64; 2]> {
                Ok([
                    number(&clock[key][0], &format!("clock.{key}[0]"))?,
                    number(&clock[key][1], &format!("clock.{key}[1]"))?,
                ])
            };
            Some(TscClock {
                tsc: pair("tsc")?,
                ns: pair("monotonic_ns")?,
            })
        }
    };
    let word = |value: &serde_json::Value, what: &str| {
        u32::try_from(value.as_u64().unwrap_or(0))
            .with_context(|| at(&format!("{what} is too large")))
    };
    let pid = meta["target"]["pid"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok());
    let mut maps = Vec::new();
    for (process, file) in meta["maps"].as_object().into_iter().flatten() {
        let file = file
            .as_str()
            .filter(|f| !f.contains('/'))
            .with_context(|| at(&format!("maps.{process} is not a file name")))?;
        let process = process
            .parse()
            .with_context(|| at(&format!("maps: {process} is not a process id")))?;
        maps.push((process, dir.join(file)));
    }
    // Earlier captures kept one `maps`, the traced process's.
    let one = dir.join("maps");
    if maps.is_empty() && one.exists() {
        maps.push((pid.unwrap_or_default(), one));
    }
    let switches = dir.join("switches");
    Ok(Saved {
        traces,
        maps,
        pid,
        threads: meta["threads"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(tid, name)| Some((tid.parse().ok()?, name.as_str()?.to_owned())))
            .collect(),
        build_ids: meta["build_ids"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(path, id)| (path.clone(), id.as_str().map(str::to_owned)))
            .collect(),
        switches: if switches.exists() {
            crate::pt_sideband::load(&switches)?
        } else {
            Vec::new()
        },
        mtc_period: u8::try_from(word(&meta["fields"]["mtc_period"], "fields.mtc_period")?)?,
        cpuid_0x15: (
            word(&meta["cpuid_0x15"]["eax"], "cpuid_0x15.eax")?,
            word(&meta["cpuid_0x15"]["ebx"], "cpuid_0x15.ebx")?,
        ),
        clock,
    })
}

fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::Duration;

    use weft_pt::capture::Aux;

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
        assert!(cpu_list("3-1").is_err());
        assert!(cpu_list("x").is_err());
    }

    #[test]
    fn this_process_may_run_on_some_cpu() {
        let cpus = affinity(std::process::id()).unwrap();
        assert!(!cpus.is_empty());
        let err = affinity(u32::MAX >> 1).unwrap_err().to_string();
        assert!(err.contains("no CPUs for process"), "{err}");
    }

    #[test]
    fn a_capture_is_written_with_private_files_and_says_what_it_holds() {
        let dir = std::env::temp_dir().join(format!("weft-pt-save-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let plan = Plan {
            cpus: vec![0, 2],
            aux_bytes: 4 << 20,
            duration: Duration::from_millis(100),
            deadline: Duration::from_millis(350),
            fields: vec![("tsc", 1), ("mtc_period", 3)],
            snapshot: false,
            kernel: false,
        };
        let aux = |bytes: &[u8], truncated| Aux {
            bytes: bytes.to_vec(),
            truncated,
        };
        let window = Window {
            traces: vec![(0, aux(&[2, 0x82], false)), (2, aux(&[0; 5], true))],
            watchdog: false,
            traced_for: Duration::from_millis(101),
        };
        let clock = TscClock {
            tsc: [1000, 3000],
            ns: [10, 20],
        };
        let switches = [Switch {
            time: 15,
            cpu: 2,
            pid: 7,
            tid: 8,
        }];
        let threads = BTreeMap::from([(8, "worker".to_owned())]);
        let build_ids = BTreeMap::from([
            ("/usr/bin/app".to_owned(), Some("ab12".to_owned())),
            ("/usr/lib/plain.so".to_owned(), None),
        ]);
        let sidebands = Sidebands {
            clock: Some(clock),
            maps: &[(7, b"maps".to_vec())],
            build_ids: &build_ids,
            switches: Some((&switches, 1)),
            threads: &threads,
        };
        save(&dir, &plan, &window, &sidebands, &json!({"pid": 7})).unwrap();
        for file in ["cpu0.pt", "cpu2.pt", "maps-7", "switches", "capture.json"] {
            let mode = fs::metadata(dir.join(file)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        assert_eq!(fs::read(dir.join("cpu2.pt")).unwrap(), [0; 5]);
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("capture.json")).unwrap()).unwrap();
        assert_eq!(
            meta["cpus"][1],
            json!({"cpu": 2, "file": "cpu2.pt", "bytes": 5, "truncated": true})
        );
        assert_eq!(meta["fields"], json!({"tsc": 1, "mtc_period": 3}));
        assert_eq!(meta["traced_ns"], 101_000_000);
        assert_eq!(meta["target"], json!({"pid": 7}));
        // What decoding reads back.
        let saved = load(&dir).unwrap();
        assert_eq!(
            saved.traces,
            [(0, dir.join("cpu0.pt")), (2, dir.join("cpu2.pt"))]
        );
        assert_eq!(saved.maps, [(7, dir.join("maps-7"))]);
        assert_eq!((saved.mtc_period, saved.clock), (3, Some(clock)));
        assert_eq!((saved.pid, saved.switches), (Some(7), switches.to_vec()));
        assert_eq!(saved.threads, HashMap::from([(8, "worker".to_owned())]));
        assert_eq!(saved.build_ids, build_ids.into_iter().collect());
        assert_eq!(
            meta["switches"],
            json!({"file": "switches", "records": 1, "lost": 1})
        );
        // Nothing is overwritten: a second save into the same place fails.
        let none = Sidebands {
            clock: None,
            maps: &[],
            build_ids: &BTreeMap::new(),
            switches: None,
            threads: &BTreeMap::new(),
        };
        let err = save(&dir, &plan, &window, &none, &json!({})).unwrap_err();
        assert!(format!("{err:#}").contains("cpu0.pt"), "{err:#}");
        fs::remove_dir_all(&dir).unwrap();
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
