//! The context switches of a capture window: every switch on the traced
//! CPUs, from the `switch` source, kept in the capture as
//! `switches` (JSON lines: `ns`, `cpu`, `pid`, `tid` of the thread that
//! came in) so that decoding splits each CPU's trace between the threads
//! that ran (`weft_pt::threads`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::error::{Error, Result};
use weft_abi::switch::SwitchEvent;
use weft_kernel::{
    events::{EventProbe, Filter},
    source::SWITCH,
};
use weft_pt::perf_data::Switch;

/// Ring bytes per CPU: a busy CPU switches some 100,000 times a second,
/// 32 bytes each, and the rings are drained every 10 ms.
const RING_BYTES: u32 = 1 << 20;

/// Switches being recorded.
pub struct Switches {
    probe: EventProbe,
    cpus: HashSet<u32>,
    seen: Vec<(SwitchEvent, u32)>,
    /// Each thread's process, as the switches that took it off a CPU say.
    pids: HashMap<u32, u32>,
}

impl Switches {
    /// Starts recording the switches on `cpus`, or says why the eBPF
    /// source cannot load.
    pub fn start(cpus: &[u32]) -> Result<Self> {
        let probe = EventProbe::load(&[&SWITCH], &Filter::default(), RING_BYTES)?;
        Ok(Self {
            probe,
            cpus: cpus.iter().copied().collect(),
            seen: Vec::new(),
            pids: HashMap::new(),
        })
    }

    /// Takes what the rings hold.
    pub fn drain(&mut self) {
        let (cpus, switches, pids) = (&self.cpus, &mut self.seen, &mut self.pids);
        // Each drain is a bounded batch: until the rings are empty.
        while self
            .probe
            .drain(|_, _, record| {
                let Some(event) = parse(record) else {
                    return;
                };
                pids.insert(event.prev_tid, event.prev_pid);
                if cpus.contains(&event.header.cpu) {
                    switches.push((event, event.header.cpu));
                }
            })
            .more
        {}
    }

    /// Stops recording: the switches, each naming the process of the
    /// thread that came in (0 where neither the switches nor `/proc` know
    /// it), and how many the kernel lost.
    pub fn finish(mut self) -> (Vec<Switch>, u64) {
        self.drain();
        let lost = (self.probe.losses().iter()).map(|(_, l)| l.lost()).sum();
        // Threads no switch-out named are looked up in /proc once each.
        for (event, _) in &self.seen {
            let tid = event.next_tid;
            if tid != 0 && !self.pids.contains_key(&tid) {
                self.pids.insert(tid, tgid(tid).unwrap_or(0));
            }
        }
        let mut switches: Vec<Switch> = self
            .seen
            .iter()
            .map(|(event, cpu)| {
                let tid = event.next_tid;
                let pid = self.pids.get(&tid).copied().unwrap_or(0);
                Switch {
                    time: event.ts_ns,
                    cpu: *cpu,
                    pid: pid.cast_signed(),
                    tid: tid.cast_signed(),
                }
            })
            .collect();
        switches.sort_by_key(|s| (s.cpu, s.time));
        (switches, lost)
    }
}

/// A `SwitchEvent` from its ring bytes.
fn parse(record: &[u8]) -> Option<SwitchEvent> {
    // SAFETY: the length is checked, and a SwitchEvent is Pod.
    (record.len() >= size_of::<SwitchEvent>())
        .then(|| unsafe { record.as_ptr().cast::<SwitchEvent>().read_unaligned() })
}

/// The process of thread `tid`, while it lives.
fn tgid(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// `switches` as JSON lines.
pub fn to_lines(switches: &[Switch]) -> String {
    let mut lines = String::new();
    for s in switches {
        let line = serde_json::json!({"ns": s.time, "cpu": s.cpu, "pid": s.pid, "tid": s.tid});
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    lines
}

/// Reads a capture's `switches` file.
pub fn load(path: &Path) -> Result<Vec<Switch>> {
    let bytes = weft_symbols::read_file(path).map_err(Error::file("reading", path))?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let at =
                |what: &str| Error::Damaged(format!("{}: line {}: {what}", path.display(), i + 1));
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|error| at(&error.to_string()))?;
            let number = |key: &str| {
                value[key]
                    .as_i64()
                    .ok_or_else(|| at(&format!("no `{key}`")))
            };
            let out_of_range = |_| at("a number out of range");
            Ok(Switch {
                time: u64::try_from(number("ns")?).map_err(out_of_range)?,
                cpu: u32::try_from(number("cpu")?).map_err(out_of_range)?,
                pid: i32::try_from(number("pid")?).map_err(out_of_range)?,
                tid: i32::try_from(number("tid")?).map_err(out_of_range)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_back_as_written_and_bad_lines_name_their_place() {
        let switches = vec![
            Switch {
                time: 7_000_000_000,
                cpu: 3,
                pid: 4242,
                tid: 4243,
            },
            Switch {
                time: 7_000_001_500,
                cpu: 3,
                pid: 0,
                tid: 0,
            },
        ];
        let path = std::env::temp_dir().join(format!("weft-switches-{}", std::process::id()));
        std::fs::write(&path, to_lines(&switches)).unwrap();
        assert_eq!(load(&path).unwrap(), switches);
        std::fs::write(&path, "{\"ns\": 1, \"cpu\": 0, \"pid\": 1}\n").unwrap();
        let error = format!("{:#}", load(&path).unwrap_err());
        assert!(error.contains("line 1: no `tid`"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }

    /// The kernel side, here for real (root and BPF; `weft pt record`
    /// itself stops earlier on a CPU without PT).
    #[test]
    fn a_sleeping_thread_is_seen_coming_back_with_its_process() {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root for BPF");
            return;
        }
        let cpus: Vec<u32> = (0..weft_kernel::ebpf::cpus().unwrap()).collect();
        let mut recording = Switches::start(&cpus).expect("the switch source loads");
        let sleeper = std::thread::spawn(|| {
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            // SAFETY: no preconditions.
            unsafe { libc::gettid() }
        });
        while !sleeper.is_finished() {
            recording.drain();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let tid = sleeper.join().unwrap();
        let (switches, lost) = recording.finish();
        let back: Vec<&Switch> = switches.iter().filter(|s| s.tid == tid).collect();
        assert!(back.len() >= 20, "{} switches to the sleeper", back.len());
        let pid = i32::try_from(std::process::id()).unwrap();
        assert!(back.iter().all(|s| s.pid == pid), "{back:?}");
        assert!(switches.is_sorted_by_key(|s| (s.cpu, s.time)));
        assert_eq!(lost, 0);
    }

    #[test]
    fn a_ring_record_reads_as_the_kernel_wrote_it() {
        let mut record = Vec::new();
        for word in [5u32, 1] {
            record.extend(word.to_le_bytes());
        }
        record.extend(123u64.to_le_bytes());
        for word in [10u32, 9, 11, 0] {
            record.extend(word.to_le_bytes());
        }
        let event = parse(&record).unwrap();
        assert_eq!(
            (
                event.header.cpu,
                event.ts_ns,
                event.prev_tid,
                event.prev_pid,
                event.next_tid
            ),
            (1, 123, 10, 9, 11)
        );
        assert_eq!(parse(&record[..20]), None);
    }
}
