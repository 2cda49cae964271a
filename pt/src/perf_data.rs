//! Intel PT recorded by `perf record -e intel_pt//`: the AUX data of a
//! `perf.data` file, in queues (one per CPU, or per thread in per-thread
//! mode), with the sideband needed to decode it: the executable mappings of
//! each process, thread names, a count of context switches and the
//! TSC-to-time conversion
//! (`tools/perf/Documentation/perf.data-file-format.txt`).
//!
//! The whole file is read into memory. Pipe-mode files (`perf record -o -`)
//! and compressed records (`perf record -z`) are refused with an error.
//!
//! Why by hand and not `linux-perf-data`: that crate reads AUXTRACE records
//! too, but it brings prost, prost-derive and a C build of zstd (for
//! simpleperf files and `-z`) into a tree kept lean for 2-core builds, for
//! the six record types and two header features weft needs here; and every
//! error here names the file offset of the damaged record.

use std::collections::BTreeMap;
use std::fmt;

use crate::image::Mapping;
use crate::time::Clocks;

/// Kernel record types (`enum perf_event_type`).
const MMAP: u32 = 1;
const LOST: u32 = 2;
const COMM: u32 = 3;
const MMAP2: u32 = 10;
const AUX: u32 = 11;
const SWITCH_CPU_WIDE: u32 = 15;
/// Records perf itself writes (`enum perf_user_event_type`).
const AUXTRACE_INFO: u32 = 70;
const AUXTRACE: u32 = 71;
const TIME_CONV: u32 = 79;
const COMPRESSED: u32 = 81;

/// `PERF_AUXTRACE_INTEL_PT`, the kind of an Intel PT `AUXTRACE_INFO`.
const AUXTRACE_INTEL_PT: u32 = 1;
/// `PROT_EXEC` in an `MMAP2` record.
const PROT_EXEC: u32 = 4;
/// `PERF_AUX_FLAG_TRUNCATED`: the AUX buffer was full and data was lost.
const AUX_TRUNCATED: u64 = 1;
/// `PERF_RECORD_MISC_SWITCH_OUT`: a switch record of the task leaving.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `perf_event_attr.sample_type` bits of the `sample_id_all` trailer, in
/// the order its fields come.
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_STREAM_ID: u64 = 1 << 9;
const SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `perf_event_attr`'s `sample_id_all` flag bit.
const SAMPLE_ID_ALL: u64 = 1 << 18;

/// What is wrong with a `perf.data` file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfError {
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {:#x}: {}", self.offset, self.what)
    }
}

impl std::error::Error for PerfError {}

/// One piece of AUX data: `size` bytes at `offset` of the queue's trace,
/// stored at `at` in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub at: usize,
    pub size: usize,
    pub offset: u64,
}

/// The trace of one AUX buffer: a CPU's, or a thread's in per-thread mode
/// (then `cpu` is -1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    pub idx: u32,
    pub cpu: i32,
    pub tid: i32,
    pub chunks: Vec<Chunk>,
}

impl Queue {
    /// Bytes of trace in the file.
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.size).sum()
    }

    /// The trace, from the chunks `file` holds, in order.
    ///
    /// Chunks that overlap (snapshot mode writes what is in the buffer each
    /// time) give their bytes once. After a gap (trace the kernel lost)
    /// the decoder finds garbage at the join and resyncs at the next PSB.
    pub fn trace(&self, file: &[u8]) -> Vec<u8> {
        let mut trace = Vec::with_capacity(self.bytes());
        // How far into the queue's trace the bytes taken so far reach.
        let mut end = 0u64;
        for chunk in &self.chunks {
            let skip = end.saturating_sub(chunk.offset).min(chunk.size as u64) as usize;
            trace.extend_from_slice(&file[chunk.at + skip..chunk.at + chunk.size]);
            end = end.max(chunk.offset + chunk.size as u64);
        }
        trace
    }
}

/// An executable mapping of a process (`MMAP` or `MMAP2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap {
    pub pid: i32,
    pub tid: i32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub filename: String,
}

/// A thread's name (`COMM`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
}

/// perf time from TSC: `time_zero + tsc * time_mult >> time_shift`, as
/// the kernel's `perf_event_mmap_page` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeConv {
    pub shift: u16,
    pub mult: u32,
    pub zero: u64,
}

impl TimeConv {
    /// The perf time (ns) of `tsc`.
    pub fn ns(&self, tsc: u64) -> u64 {
        let (quot, rem) = (tsc >> self.shift, tsc & ((1u64 << self.shift) - 1));
        self.zero
            .wrapping_add(quot.wrapping_mul(u64::from(self.mult)))
            .wrapping_add((rem * u64::from(self.mult)) >> self.shift)
    }
}

/// Intel PT's `AUXTRACE_INFO`: the PMU type and how the trace was
/// configured (`tools/perf/arch/x86/util/intel-pt.c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtInfo {
    pub pmu_type: u64,
    pub time: TimeConv,
    pub tsc_bit: u64,
    pub snapshot_mode: bool,
    pub per_cpu_mmaps: bool,
    /// The MTC and CYC bits, where the file has them.
    pub mtc_bit: Option<u64>,
    pub cyc_bit: Option<u64>,
    /// Where the MTC period sits in the config.
    pub mtc_freq_bits: Option<u64>,
    /// TSC ticks per crystal-clock tick, as numerator and denominator
    /// (CPUID leaf 0x15 EBX and EAX).
    pub tsc_ctc: Option<(u64, u64)>,
    /// The CPU's maximum non-turbo ratio (for CBR packets).
    pub max_non_turbo_ratio: Option<u64>,
    /// The `intel_pt` event's config, from the file's attributes.
    pub config: Option<u64>,
}

impl PtInfo {
    /// Whether the config sets the bit at `position`; `None` without a
    /// config or position.
    pub fn enabled(&self, position: Option<u64>) -> Option<bool> {
        Some(self.config? >> position.filter(|p| *p < 64)? & 1 == 1)
    }

    /// The clocks the trace was recorded with, as far as the file says
    /// (the rest left at their defaults).
    pub fn clocks(&self) -> Clocks {
        let mtc_freq = self
            .config
            .zip(self.mtc_freq_bits.filter(|b| *b < 60))
            .map_or(0, |(config, at)| (config >> at) & 0xf);
        let (ebx, eax) = self.tsc_ctc.unwrap_or((0, 0));
        Clocks {
            mtc_freq: mtc_freq as u8,
            ctc_eax: u32::try_from(eax).unwrap_or(0),
            ctc_ebx: u32::try_from(ebx).unwrap_or(0),
            nom_freq: self
                .max_non_turbo_ratio
                .and_then(|r| u8::try_from(r).ok())
                .unwrap_or(0),
            ..Clocks::default()
        }
    }
}

/// A context switch (`SWITCH_CPU_WIDE`): from `time` (perf's clock) on,
/// `cpu` runs thread `tid` of process `pid` (0 for the idle task).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub time: u64,
    pub cpu: u32,
    pub pid: i32,
    pub tid: i32,
}

/// Where the `sample_id_all` trailer of non-sample records keeps the
/// thread, time and CPU: offsets from the trailer's start, and its size.
#[derive(Debug, Clone, Copy, Default)]
struct SampleId {
    size: u64,
    tid: Option<u64>,
    time: Option<u64>,
    cpu: Option<u64>,
}

impl SampleId {
    /// The layout `sample_type` gives the trailer.
    fn new(sample_type: u64) -> Self {
        let mut id = SampleId::default();
        for bit in [
            SAMPLE_TID,
            SAMPLE_TIME,
            SAMPLE_ID,
            SAMPLE_STREAM_ID,
            SAMPLE_CPU,
            SAMPLE_IDENTIFIER,
        ] {
            if sample_type & bit == 0 {
                continue;
            }
            match bit {
                SAMPLE_TID => id.tid = Some(id.size),
                SAMPLE_TIME => id.time = Some(id.size),
                SAMPLE_CPU => id.cpu = Some(id.size),
                _ => {}
            }
            id.size += 8;
        }
        id
    }
}

/// What a `perf.data` file holds for Intel PT decoding.
#[derive(Debug, Default)]
pub struct PerfData {
    pub info: Option<PtInfo>,
    pub time_conv: Option<TimeConv>,
    pub queues: Vec<Queue>,
    pub mmaps: Vec<Mmap>,
    pub comms: Vec<Comm>,
    /// Context switches with their thread, time and CPU, in file order
    /// (the records need `sample_id_all` with time and CPU).
    pub switches: Vec<Switch>,
    /// The `sample_id_all` trailer of non-sample records, if they have one.
    sample_id: Option<SampleId>,
    /// `AUX` records flagged truncated: the kernel lost trace there.
    pub truncated: u64,
    /// Records the kernel could not write (`LOST`), summed.
    pub lost: u64,
    /// How many records of each type the data section holds.
    pub counts: BTreeMap<u32, u64>,
}

/// `perf_file_header`: magic, size, `attr_size`, then the attrs, data and
/// event types sections (offset, size each), then the feature bits. Only
/// the data section is read.
const HEADER_SIZE: u64 = 104;
const MAGIC: &[u8; 8] = b"PERFILE2";

impl PerfData {
    /// Reads a `perf.data` file's bytes.
    pub fn parse(file: &[u8]) -> Result<Self, PerfError> {
        let r = Reader(file);
        if file.get(..8) != Some(MAGIC.as_slice()) {
            return Err(error(0, "not a perf.data file (no PERFILE2 magic)"));
        }
        let size = r.u64(8)?;
        if size != HEADER_SIZE {
            return Err(error(
                8,
                "a pipe-mode perf.data (perf record -o -) is not supported; record to a file",
            ));
        }
        let (data, data_size) = (r.u64(40)?, r.u64(48)?);
        let mut perf = PerfData {
            sample_id: sample_id(&r)?,
            ..PerfData::default()
        };
        let end = data
            .checked_add(data_size)
            .filter(|&end| end <= file.len() as u64)
            .ok_or_else(|| error(40, "the data section lies outside the file"))?;
        let mut at = data;
        while at < end {
            at = perf.record(&r, at)?;
        }
        if let Some(info) = &mut perf.info {
            info.config = attr_config(&r, info.pmu_type)?;
        }
        perf.queues.sort_by_key(|q| q.idx);
        for queue in &mut perf.queues {
            queue.chunks.sort_by_key(|c| c.offset);
        }
        Ok(perf)
    }

    /// Reads the record at `at`; returns where the next one starts.
    fn record(&mut self, r: &Reader, at: u64) -> Result<u64, PerfError> {
        let kind = r.u32(at)?;
        let misc = r.u16(at + 4)?;
        let size = u64::from(r.u16(at + 6)?);
        if size < 8 {
            return Err(error(at, format!("a record of {size} bytes")));
        }
        *self.counts.entry(kind).or_default() += 1;
        let body = at + 8;
        let end = at + size;
        match kind {
            MMAP | MMAP2 => {
                let (prot_at, name_at) = if kind == MMAP {
                    (None, body + 32)
                } else {
                    (Some(body + 56), body + 64)
                };
                // MMAP records are of executable mappings unless perf
                // asked for data mappings too (misc bit 13, MMAP_DATA).
                let exec = prot_at.map_or(Ok(misc & (1 << 13) == 0), |p| {
                    r.u32(p).map(|prot| prot & PROT_EXEC != 0)
                })?;
                if exec {
                    self.mmaps.push(Mmap {
                        pid: r.i32(body)?,
                        tid: r.i32(body + 4)?,
                        addr: r.u64(body + 8)?,
                        len: r.u64(body + 16)?,
                        pgoff: r.u64(body + 24)?,
                        filename: r.string(name_at, end)?,
                    });
                }
            }
            COMM => self.comms.push(Comm {
                pid: r.i32(body)?,
                tid: r.i32(body + 4)?,
                comm: r.string(body + 8, end)?,
            }),
            AUX if r.u64(body + 16)? & AUX_TRUNCATED != 0 => self.truncated += 1,
            LOST => self.lost += r.u64(body + 8)?,
            SWITCH_CPU_WIDE => {
                if let Some(switch) = self.switch(r, misc, body, end)? {
                    self.switches.push(switch);
                }
            }
            AUXTRACE_INFO if r.u32(body)? == AUXTRACE_INTEL_PT => {
                self.info = Some(pt_info(r, body + 8, end)?);
            }
            TIME_CONV => {
                self.time_conv = Some(TimeConv {
                    shift: r.u64(body)? as u16,
                    mult: r.u64(body + 8)? as u32,
                    zero: r.u64(body + 16)?,
                });
            }
            AUXTRACE => return self.auxtrace(r, at, end),
            COMPRESSED => {
                return Err(error(
                    at,
                    "compressed records (perf record -z) are not supported; record without -z",
                ));
            }
            _ => {}
        }
        Ok(end)
    }

    /// An `AUXTRACE` record: its header, then `size` bytes of trace that
    /// the record's own size does not count.
    fn auxtrace(&mut self, r: &Reader, at: u64, end: u64) -> Result<u64, PerfError> {
        let body = at + 8;
        let size = r.u64(body)?;
        let offset = r.u64(body + 8)?;
        let idx = r.u32(body + 24)?;
        let tid = r.i32(body + 28)?;
        let cpu = r.i32(body + 32)?;
        let data_end = end
            .checked_add(size)
            .filter(|&e| e <= r.0.len() as u64)
            .ok_or_else(|| error(at, format!("AUX data of {size} bytes runs past the file")))?;
        let chunk = Chunk {
            at: end as usize,
            size: size as usize,
            offset,
        };
        match self.queues.iter_mut().find(|q| q.idx == idx) {
            Some(queue) => queue.chunks.push(chunk),
            None => self.queues.push(Queue {
                idx,
                cpu,
                tid,
                chunks: vec![chunk],
            }),
        }
        Ok(data_end)
    }

    /// A `SWITCH_CPU_WIDE` record: the other task's pid and tid, then the
    /// trailer of the task the record is about. `None` where the trailer
    /// lacks the time or the CPU.
    fn switch(
        &self,
        r: &Reader,
        misc: u16,
        body: u64,
        end: u64,
    ) -> Result<Option<Switch>, PerfError> {
        let Some(id) = self.sample_id else {
            return Ok(None);
        };
        let (Some(time_at), Some(cpu_at), Some(tid_at)) = (id.time, id.cpu, id.tid) else {
            return Ok(None);
        };
        let trailer = end
            .checked_sub(id.size)
            .filter(|t| *t >= body + 8)
            .ok_or_else(|| {
                error(
                    body,
                    "a switch record too short for its sample_id_all fields",
                )
            })?;
        // Switching out names the next task; switching in is the task's own.
        let (pid, tid) = if misc & MISC_SWITCH_OUT != 0 {
            (r.i32(body)?, r.i32(body + 4)?)
        } else {
            (r.i32(trailer + tid_at)?, r.i32(trailer + tid_at + 4)?)
        };
        Ok(Some(Switch {
            time: r.u64(trailer + time_at)?,
            cpu: r.u32(trailer + cpu_at)?,
            pid,
            tid,
        }))
    }

    /// The switches on `cpu`, in time order.
    pub fn switches_on(&self, cpu: u32) -> Vec<Switch> {
        let mut on: Vec<Switch> = self
            .switches
            .iter()
            .filter(|s| s.cpu == cpu)
            .copied()
            .collect();
        on.sort_by_key(|s| s.time);
        on
    }

    /// The process of thread `tid`, as its records say.
    pub fn pid_of(&self, tid: i32) -> Option<i32> {
        self.comms
            .iter()
            .find(|c| c.tid == tid)
            .map(|c| c.pid)
            .or_else(|| self.mmaps.iter().find(|m| m.tid == tid).map(|m| m.pid))
    }

    /// The executable file mappings of process `pid`, and the kernel's
    /// (pid -1), in the order they were made.
    pub fn mappings(&self, pid: i32) -> Vec<Mapping> {
        self.mmaps
            .iter()
            .filter(|m| (m.pid == pid || m.pid == -1) && m.filename.starts_with('/'))
            .map(|m| Mapping {
                path: m.filename.clone(),
                start: m.addr,
                len: m.len,
                offset: m.pgoff,
            })
            .collect()
    }

    /// The name of thread `tid`, the last it had.
    pub fn comm(&self, tid: i32) -> Option<&str> {
        self.comms
            .iter()
            .rev()
            .find(|c| c.tid == tid)
            .map(|c| c.comm.as_str())
    }

    /// The context switches the sideband records (`SWITCH_CPU_WIDE`).
    pub fn context_switches(&self) -> u64 {
        self.counts.get(&SWITCH_CPU_WIDE).copied().unwrap_or(0)
    }

    /// How TSC becomes perf time: from `TIME_CONV`, else `AUXTRACE_INFO`.
    pub fn clock(&self) -> Option<TimeConv> {
        self.time_conv.or(self.info.as_ref().map(|i| i.time))
    }
}

/// perf's name for record type `kind` (as `perf report -D` prints it).
pub fn record_name(kind: u32) -> Option<&'static str> {
    const KERNEL: [&str; 22] = [
        "",
        "MMAP",
        "LOST",
        "COMM",
        "EXIT",
        "THROTTLE",
        "UNTHROTTLE",
        "FORK",
        "READ",
        "SAMPLE",
        "MMAP2",
        "AUX",
        "ITRACE_START",
        "LOST_SAMPLES",
        "SWITCH",
        "SWITCH_CPU_WIDE",
        "NAMESPACES",
        "KSYMBOL",
        "BPF_EVENT",
        "CGROUP",
        "TEXT_POKE",
        "AUX_OUTPUT_HW_ID",
    ];
    const USER: [&str; 20] = [
        "ATTR",
        "EVENT_TYPE",
        "TRACING_DATA",
        "BUILD_ID",
        "FINISHED_ROUND",
        "ID_INDEX",
        "AUXTRACE_INFO",
        "AUXTRACE",
        "AUXTRACE_ERROR",
        "THREAD_MAP",
        "CPU_MAP",
        "STAT_CONFIG",
        "STAT",
        "STAT_ROUND",
        "EVENT_UPDATE",
        "TIME_CONV",
        "FEATURE",
        "COMPRESSED",
        "FINISHED_INIT",
        "COMPRESSED2",
    ];
    let name = match kind {
        1..=21 => KERNEL[kind as usize],
        64..=83 => USER[kind as usize - 64],
        _ => return None,
    };
    Some(name)
}

/// Intel PT's `AUXTRACE_INFO` private words, from `at` to `end`.
fn pt_info(r: &Reader, at: u64, end: u64) -> Result<PtInfo, PerfError> {
    let words = (end.saturating_sub(at) / 8) as usize;
    let word = |i: usize| -> Result<Option<u64>, PerfError> {
        if i < words {
            r.u64(at + 8 * i as u64).map(Some)
        } else {
            Ok(None)
        }
    };
    let need = |i: usize| -> Result<u64, PerfError> {
        word(i)?.ok_or_else(|| error(at, "a short Intel PT AUXTRACE_INFO record"))
    };
    Ok(PtInfo {
        pmu_type: need(0)?,
        time: TimeConv {
            shift: need(1)? as u16,
            mult: need(2)? as u32,
            zero: need(3)?,
        },
        tsc_bit: need(5)?,
        snapshot_mode: need(8)? != 0,
        per_cpu_mmaps: need(9)? != 0,
        mtc_bit: word(10)?,
        mtc_freq_bits: word(11)?,
        tsc_ctc: word(12)?.zip(word(13)?),
        cyc_bit: word(14)?,
        max_non_turbo_ratio: word(15)?,
        config: None,
    })
}

/// The `sample_id_all` trailer the header's first attribute gives
/// non-sample records (perf gives every event of a file the same one).
fn sample_id(r: &Reader) -> Result<Option<SampleId>, PerfError> {
    let (entry, at) = (r.u64(16)?, r.u64(24)?);
    if entry < 48 || r.u64(32)? < entry {
        return Ok(None);
    }
    let field = |offset: u64| {
        at.checked_add(offset)
            .ok_or_else(|| error(24, "the attribute section lies outside the file"))
            .and_then(|at| r.u64(at))
    };
    let (sample_type, flags) = (field(24)?, field(40)?);
    Ok((flags & SAMPLE_ID_ALL != 0).then(|| SampleId::new(sample_type)))
}

/// The config of the attribute of PMU `pmu_type` in the header's attribute
/// section (`perf_file_attr`s of `attr_size` bytes: `perf_event_attr`,
/// whose `type` and `config` lead, then an id section).
fn attr_config(r: &Reader, pmu_type: u64) -> Result<Option<u64>, PerfError> {
    let (entry, at, size) = (r.u64(16)?, r.u64(24)?, r.u64(32)?);
    if entry < 16 {
        return Ok(None);
    }
    for i in 0..size / entry {
        let attr = i
            .checked_mul(entry)
            .and_then(|offset| at.checked_add(offset))
            .ok_or_else(|| error(24, "the attribute section lies outside the file"))?;
        if u64::from(r.u32(attr)?) == pmu_type {
            return r.u64(attr + 8).map(Some);
        }
    }
    Ok(None)
}

fn error(offset: u64, what: impl Into<String>) -> PerfError {
    PerfError {
        offset,
        what: what.into(),
    }
}

/// Little-endian reads that fail with the offset past the end.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes<const N: usize>(&self, at: u64) -> Result<[u8; N], PerfError> {
        usize::try_from(at)
            .ok()
            .and_then(|at| self.0.get(at..at.checked_add(N)?))
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| error(at, "the file ends inside a record"))
    }

    fn u16(&self, at: u64) -> Result<u16, PerfError> {
        self.bytes(at).map(u16::from_le_bytes)
    }

    fn u32(&self, at: u64) -> Result<u32, PerfError> {
        self.bytes(at).map(u32::from_le_bytes)
    }

    fn i32(&self, at: u64) -> Result<i32, PerfError> {
        self.bytes(at).map(i32::from_le_bytes)
    }

    fn u64(&self, at: u64) -> Result<u64, PerfError> {
        self.bytes(at).map(u64::from_le_bytes)
    }

    /// The NUL-terminated string from `at`, within `end`.
    fn string(&self, at: u64, end: u64) -> Result<String, PerfError> {
        let bytes = self
            .0
            .get(at as usize..end as usize)
            .ok_or_else(|| error(at, "the file ends inside a record"))?;
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[..len]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend(u16::try_from(8 + body.len()).unwrap().to_le_bytes());
        r.extend(body);
        r
    }

    /// A file with a COMM record and an AUXTRACE record of `trace`.
    fn file(trace: &[u8]) -> Vec<u8> {
        let mut data = record(COMM, b"\x07\0\0\0\x07\0\0\0prog\0\0\0\0");
        let mut aux = (trace.len() as u64).to_le_bytes().to_vec();
        aux.extend([0u8; 16]);
        aux.extend([0, 0, 0, 0, 7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        data.extend(record(AUXTRACE, &aux));
        data.extend(trace);
        let attr = [0u8; 144];
        let words = [104, 144, 104, 144, 248, data.len() as u64, 0, 0];
        let mut file = MAGIC.to_vec();
        file.extend(words.iter().flat_map(|w| u64::to_le_bytes(*w)));
        file.extend([0u8; 32]);
        file.extend(attr);
        file.extend(data);
        file
    }

    #[test]
    fn reads_a_queue_and_a_thread_name() {
        let bytes = file(b"\x02\x82trace!!");
        let perf = PerfData::parse(&bytes).unwrap();
        assert_eq!(perf.queues.len(), 1);
        let queue = &perf.queues[0];
        assert_eq!((queue.tid, queue.cpu, queue.bytes()), (7, -1, 9));
        assert_eq!(queue.trace(&bytes), b"\x02\x82trace!!");
        assert_eq!(perf.comm(7), Some("prog"));
        assert_eq!(perf.pid_of(7), Some(7));
    }

    #[test]
    fn overlapping_chunks_give_their_bytes_once() {
        let file = b"abcdefghij";
        let chunk = |at, size, offset| Chunk { at, size, offset };
        let queue = Queue {
            chunks: vec![chunk(0, 4, 100), chunk(2, 5, 102), chunk(8, 2, 110)],
            ..Queue::default()
        };
        // abcd, then cdefg from offset 102 (cd seen), then a gap to ij.
        assert_eq!(queue.trace(file), b"abcdefgij");
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = file(b"\x02\x82trace!!");
        for len in 0..bytes.len() {
            assert!(PerfData::parse(&bytes[..len]).is_err(), "{len}");
        }
    }

    #[test]
    fn pipe_mode_and_compressed_records_are_refused_by_name() {
        let mut pipe = file(b"");
        pipe[8] = 16;
        let error = PerfData::parse(&pipe).unwrap_err();
        assert!(error.what.contains("pipe-mode"), "{error}");
        let mut compressed = file(b"");
        compressed[248] = COMPRESSED as u8;
        let error = PerfData::parse(&compressed).unwrap_err();
        assert_eq!(error.offset, 248);
        assert!(error.what.contains("perf record -z"), "{error}");
    }

    #[test]
    fn tsc_becomes_perf_time_as_the_kernel_computes_it() {
        let clock = TimeConv {
            shift: 10,
            mult: 500,
            zero: 1_000,
        };
        // 3000 ticks at 500/1024 ns each.
        assert_eq!(clock.ns(3_000), 1_000 + 3_000 * 500 / 1024);
        assert_eq!(clock.ns(u64::MAX), clock.ns(u64::MAX));
    }
}
