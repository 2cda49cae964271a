//! A capture directory: `cpuN.pt` per CPU (raw PT, for `weft pt dump`),
//! `capture.json` (what was traced and how, with the clock parameters the
//! decoder needs), `maps-PID`, the memory map of each traced process, and
//! `switches`, the context switches on the traced CPUs. Written once, every
//! file new and mode 0600 ([`save`]); read back whole for decoding
//! ([`load`]).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use serde_json::json;
use weft_pt::time::TscClock;

use crate::window::{Window, WindowPlan};
use weft_pt::perf_data::Switch;

/// What a capture keeps besides the trace: how its TSC maps to
/// `CLOCK_MONOTONIC`, the process's maps, and the context switches on its
/// CPUs (with how many were lost).
pub struct Sidebands<'a> {
    pub clock: Option<TscClock>,
    /// Each traced process's memory map.
    pub maps: &'a [(u32, Vec<u8>)],
    /// The build-id of each executable file in `maps`.
    pub build_ids: &'a BTreeMap<String, Option<String>>,
    pub switches: Option<(&'a [Switch], u64)>,
    /// The names of the traced process's threads that ran.
    pub threads: &'a BTreeMap<i32, String>,
}

/// Write the capture into `dir`, every file new and mode 0600.
pub fn save(
    dir: &Path,
    plan: &WindowPlan,
    window: &Window,
    sidebands: &Sidebands,
    target: &serde_json::Value,
) -> Result<()> {
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
            crate::switches::to_lines(switches).as_bytes(),
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
    let text = serde_json::to_string_pretty(&meta).expect("a JSON value prints");
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
pub fn load(dir: &Path) -> Result<Saved> {
    let path = dir.join("capture.json");
    let text = weft_symbols::read_file(&path).map_err(|error| Error::Io {
        doing: format!(
            "{}: not a `weft pt record` capture (no capture.json)",
            dir.display()
        ),
        error,
    })?;
    let at = |what: &str| Error::Damaged(format!("{}: {what}", path.display()));
    let meta: serde_json::Value =
        serde_json::from_slice(&text).map_err(|error| at(&error.to_string()))?;
    if meta["version"] != 1 {
        let version = &meta["version"];
        return Err(at(&format!("version {version} is not one weft reads (1)")));
    }
    let number = |value: &serde_json::Value, what: &str| {
        (value.as_u64()).ok_or_else(|| at(&format!("{what} is not a number")))
    };
    let mut traces = Vec::new();
    for (i, cpu) in meta["cpus"].as_array().into_iter().flatten().enumerate() {
        let file = cpu["file"]
            .as_str()
            .filter(|f| !f.contains('/'))
            .ok_or_else(|| at(&format!("cpus[{i}].file is not a file name")))?;
        let number = u32::try_from(number(&cpu["cpu"], &format!("cpus[{i}].cpu"))?)
            .map_err(|_| at(&format!("cpus[{i}].cpu is too large")))?;
        traces.push((number, dir.join(file)));
    }
    let clock = match &meta["clock"] {
        serde_json::Value::Null => None,
        clock => {
            let pair = |key: &str| -> Result<[u64; 2]> {
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
        u32::try_from(value.as_u64().unwrap_or(0)).map_err(|_| at(&format!("{what} is too large")))
    };
    let pid = meta["target"]["pid"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok());
    let mut maps = Vec::new();
    for (process, file) in meta["maps"].as_object().into_iter().flatten() {
        let file = file
            .as_str()
            .filter(|f| !f.contains('/'))
            .ok_or_else(|| at(&format!("maps.{process} is not a file name")))?;
        let process =
            (process.parse()).map_err(|_| at(&format!("maps: {process} is not a process id")))?;
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
            crate::switches::load(&switches)?
        } else {
            Vec::new()
        },
        mtc_period: u8::try_from(word(&meta["fields"]["mtc_period"], "fields.mtc_period")?)
            .map_err(|_| at("fields.mtc_period is too large"))?,
        cpuid_0x15: (
            word(&meta["cpuid_0x15"]["eax"], "cpuid_0x15.eax")?,
            word(&meta["cpuid_0x15"]["ebx"], "cpuid_0x15.ebx")?,
        ),
        clock,
    })
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(Error::file("writing", path))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::Duration;

    use crate::window::Aux;

    use super::*;

    #[test]
    fn a_capture_is_written_with_private_files_and_says_what_it_holds() {
        let dir = std::env::temp_dir().join(format!("weft-pt-save-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let plan = WindowPlan {
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
}
