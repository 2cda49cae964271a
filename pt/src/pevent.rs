//! `perf_event` sideband as libipt reads it (`--pevent:primary FILE`): a file
//! of raw `perf_event` records, one channel's, each ending in the
//! `sample_id_all` fields its `sample_type` selects, as libipt's
//! `perf-read-sideband.bash` extracts them from a `perf.data` file
//! (`include/uapi/linux/perf_event.h`; libipt's `pevent`).
//!
//! [`Channel`] reads such a file one record at a time and converts each
//! record's perf time to TSC, so records can be put in order with the trace;
//! [`Record`]'s `Display` prints it as ptdump's `--sb:compact` does, or as
//! `--sb:verbose` with [`Record::verbose`].

use std::fmt::{self, Display, Formatter};
use std::rc::Rc;

/// `enum perf_event_type` values the reader knows.
mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
}

/// `PERF_RECORD_MISC_COMM_EXEC` (and `MISC_SWITCH_OUT`, the same bit).
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_CPUMODE_MASK` and its `KERNEL` value.
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;
/// `PERF_AUX_FLAG_TRUNCATED`.
const AUX_TRUNCATED: u64 = 1;

/// `sample_type` bits of the `sample_id_all` fields, in the order they come.
pub mod sample {
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// How a channel's records were written (libipt's `pev_config`): which
/// sample fields they carry, and perf's clock as `perf_event_mmap_page`
/// gives it, to turn their times into TSC.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub sample_type: u64,
    /// Sample types by the record's `IDENTIFIER`, for files mixing events
    /// (`--pevent:sample-config`); each must include `IDENTIFIER`.
    pub sample_types: Vec<(u64, u64)>,
    pub time_zero: u64,
    pub time_shift: u16,
    pub time_mult: u32,
    /// Apply records this many TSC ticks early (`--pevent:tsc-offset`).
    pub tsc_offset: u64,
}

impl Config {
    /// TSC of a perf time (libipt's `pev_time_to_tsc`); time 0 is for
    /// records perf made up and stays 0.
    fn tsc(&self, time: u64) -> Result<u64, Fault> {
        if time == 0 {
            return Ok(0);
        }
        if self.time_mult == 0 {
            return Err(Fault::BadConfig);
        }
        let time = time.wrapping_sub(self.time_zero);
        let mult = u64::from(self.time_mult);
        let (quot, rem) = (time / mult, time % mult);
        Ok((quot << self.time_shift).wrapping_add((rem << self.time_shift) / mult))
    }

    fn sample_type(&self, identifier: Option<u64>) -> Result<u64, Fault> {
        let Some(id) = identifier else {
            return Ok(self.sample_type);
        };
        match self.sample_types.iter().find(|(i, _)| *i == id) {
            Some(&(_, ty)) if ty & sample::IDENTIFIER == 0 => Err(Fault::BadConfig),
            Some(&(_, ty)) => Ok(ty),
            None => Ok(self.sample_type),
        }
    }
}

/// Why a record could not be read, as libipt names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The file ends inside a record (or a record of type 0 pads it).
    End,
    /// A record's size disagrees with its fields.
    Nosync,
    /// A name runs past its record.
    BadPacket,
    BadConfig,
}

impl Fault {
    pub fn message(self) -> &'static str {
        match self {
            Fault::End => "reached end of trace stream",
            Fault::Nosync => "decoder out of sync",
            Fault::BadPacket => "unknown packet",
            Fault::BadConfig => "bad configuration",
        }
    }
}

/// The `sample_id_all` fields of a record, those its sample type selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    pub pid_tid: Option<(u32, u32)>,
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub identifier: Option<u64>,
}

/// A record's own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// MMAP, and MMAP2 with its file's identity and protection.
    Mmap {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        file: Option<MappedFile>,
        filename: String,
    },
    Lost {
        id: u64,
        lost: u64,
    },
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
    },
    /// EXIT and FORK.
    Task {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
    },
    /// THROTTLE and UNTHROTTLE.
    Throttle {
        time: u64,
        id: u64,
        stream_id: u64,
    },
    Aux {
        offset: u64,
        size: u64,
        flags: u64,
    },
    ItraceStart {
        pid: u32,
        tid: u32,
    },
    LostSamples {
        lost: u64,
    },
    Switch,
    SwitchCpuWide {
        pid: u32,
        tid: u32,
    },
    /// A type the reader does not know: its fields are not read.
    Unknown,
}

/// What MMAP2 adds to MMAP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    pub maj: u32,
    pub min: u32,
    pub ino: u64,
    pub ino_generation: u64,
    pub prot: u32,
    pub flags: u32,
}

/// One record of a channel, where it starts in its file and its time in
/// TSC (0 where it has no time: it applies at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: usize,
    pub kind: u32,
    pub misc: u16,
    pub body: Body,
    pub sample: Sample,
    pub tsc: u64,
}

/// Little-endian fields of one record, read in order.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn u32(&mut self) -> Result<u32, Fault> {
        let bytes = self.bytes.get(self.at..self.at + 4).ok_or(Fault::Nosync)?;
        self.at += 4;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, Fault> {
        let bytes = self.bytes.get(self.at..self.at + 8).ok_or(Fault::Nosync)?;
        self.at += 8;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// A NUL-terminated name, padded to 8 bytes.
    fn name(&mut self) -> Result<String, Fault> {
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        let len = rest.iter().position(|&b| b == 0).ok_or(Fault::BadPacket)?;
        self.at += (len + 1).next_multiple_of(8);
        Ok(String::from_utf8_lossy(&rest[..len]).into_owned())
    }
}

impl Record {
    /// Read the record at `offset` of `file`; `Err(Fault::End)` at the end.
    pub fn read(file: &[u8], offset: usize, config: &Config) -> Result<(Record, usize), Fault> {
        let header = file.get(offset..offset + 8).ok_or(Fault::End)?;
        let kind = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let misc = u16::from_le_bytes([header[4], header[5]]);
        let size = usize::from(u16::from_le_bytes([header[6], header[7]]));
        if size < 8 {
            return Err(Fault::Nosync);
        }
        if kind == 0 || file.len() < offset + size {
            return Err(Fault::End);
        }
        let bytes = &file[offset + 8..offset + size];
        let mut fields = Fields { bytes, at: 0 };
        let body = body(kind, &mut fields)?;
        let mut record = Record {
            offset,
            kind,
            misc,
            body,
            sample: Sample::default(),
            tsc: 0,
        };
        if record.body != Body::Unknown {
            record.read_sample(&mut fields, config)?;
            if fields.at != bytes.len() {
                return Err(Fault::Nosync);
            }
        }
        Ok((record, size))
    }

    fn read_sample(&mut self, fields: &mut Fields, config: &Config) -> Result<(), Fault> {
        let tail = fields
            .bytes
            .len()
            .checked_sub(8)
            .filter(|&t| t >= fields.at);
        let identifier =
            tail.map(|t| u64::from_le_bytes(fields.bytes[t..t + 8].try_into().expect("8 bytes")));
        let ty = config.sample_type(identifier)?;
        let sample = &mut self.sample;
        if ty & sample::TID != 0 {
            sample.pid_tid = Some((fields.u32()?, fields.u32()?));
        }
        if ty & sample::TIME != 0 {
            let time = fields.u64()?;
            sample.time = Some(time);
            let tsc = config.tsc(time)?;
            // Applied `tsc_offset` early, without wrapping around.
            self.tsc = tsc.saturating_sub(config.tsc_offset);
        }
        if ty & sample::ID != 0 {
            sample.id = Some(fields.u64()?);
        }
        if ty & sample::STREAM_ID != 0 {
            sample.stream_id = Some(fields.u64()?);
        }
        if ty & sample::CPU != 0 {
            sample.cpu = Some(fields.u32()?);
            fields.u32()?;
        }
        if ty & sample::IDENTIFIER != 0 {
            sample.identifier = Some(fields.u64()?);
        }
        Ok(())
    }

    /// Where a COMM record says the process called exec.
    pub fn is_exec(&self) -> bool {
        self.kind == kind::COMM && self.misc & MISC_COMM_EXEC != 0
    }

    pub fn is_fork(&self) -> bool {
        self.kind == kind::FORK
    }

    /// Where a switch record is the leaving task's.
    pub fn is_switch_out(&self) -> bool {
        matches!(self.kind, kind::SWITCH | kind::SWITCH_CPU_WIDE)
            && self.misc & MISC_SWITCH_OUT != 0
    }

    /// A mapping the kernel reports of itself (kernel code is taken from a
    /// core file, not from files on disk, which boot and insmod modify).
    pub fn is_kernel(&self) -> bool {
        self.misc & MISC_CPUMODE_MASK == MISC_KERNEL
    }

    /// Whether an AUX record says trace was lost.
    pub fn is_truncated(&self) -> bool {
        matches!(self.body, Body::Aux { flags, .. } if flags & AUX_TRUNCATED != 0)
    }

    /// The record as `--sb:verbose` prints it.
    pub fn verbose(&self) -> Verbose<'_> {
        Verbose(self)
    }

    fn name(&self) -> String {
        let base = match self.kind {
            kind::MMAP => "MMAP",
            kind::MMAP2 => "MMAP2",
            kind::LOST => "LOST",
            kind::COMM => "COMM",
            kind::EXIT => "EXIT",
            kind::FORK => "FORK",
            kind::THROTTLE => "THROTTLE",
            kind::UNTHROTTLE => "UNTHROTTLE",
            kind::AUX => "AUX",
            kind::ITRACE_START => "ITRACE_START",
            kind::LOST_SAMPLES => "LOST_SAMPLES",
            kind::SWITCH => "SWITCH",
            kind::SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
            _ => return "UNKNOWN".into(),
        };
        let suffix = match self.kind {
            kind::COMM if self.is_exec() => ".EXEC",
            kind::AUX if self.is_truncated() => ".TRUNCATED",
            kind::SWITCH | kind::SWITCH_CPU_WIDE if self.is_switch_out() => ".OUT",
            kind::SWITCH | kind::SWITCH_CPU_WIDE => ".IN",
            _ => "",
        };
        format!("PERF_RECORD_{base}{suffix}")
    }
}

fn body(kind: u32, f: &mut Fields) -> Result<Body, Fault> {
    Ok(match kind {
        kind::MMAP | kind::MMAP2 => Body::Mmap {
            pid: f.u32()?,
            tid: f.u32()?,
            addr: f.u64()?,
            len: f.u64()?,
            pgoff: f.u64()?,
            file: if kind == kind::MMAP2 {
                Some(MappedFile {
                    maj: f.u32()?,
                    min: f.u32()?,
                    ino: f.u64()?,
                    ino_generation: f.u64()?,
                    prot: f.u32()?,
                    flags: f.u32()?,
                })
            } else {
                None
            },
            filename: f.name()?,
        },
        kind::LOST => Body::Lost {
            id: f.u64()?,
            lost: f.u64()?,
        },
        kind::COMM => Body::Comm {
            pid: f.u32()?,
            tid: f.u32()?,
            comm: f.name()?,
        },
        kind::EXIT | kind::FORK => Body::Task {
            pid: f.u32()?,
            ppid: f.u32()?,
            tid: f.u32()?,
            ptid: f.u32()?,
            time: f.u64()?,
        },
        kind::THROTTLE | kind::UNTHROTTLE => Body::Throttle {
            time: f.u64()?,
            id: f.u64()?,
            stream_id: f.u64()?,
        },
        kind::AUX => Body::Aux {
            offset: f.u64()?,
            size: f.u64()?,
            flags: f.u64()?,
        },
        kind::ITRACE_START => Body::ItraceStart {
            pid: f.u32()?,
            tid: f.u32()?,
        },
        kind::LOST_SAMPLES => Body::LostSamples { lost: f.u64()? },
        kind::SWITCH => Body::Switch,
        kind::SWITCH_CPU_WIDE => Body::SwitchCpuWide {
            pid: f.u32()?,
            tid: f.u32()?,
        },
        _ => Body::Unknown,
    })
}

/// A field's value as ptdump prints it: numbers in hex.
enum Shown<'a> {
    Hex(u64),
    Text(&'a str),
}

impl Display for Shown<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Shown::Hex(value) => write!(f, "{value:x}"),
            Shown::Text(text) => f.write_str(text),
        }
    }
}

impl Body {
    /// The record's own fields, named as `--sb:verbose` prints them, in
    /// its order; `switched_out` names a cpu-wide switch's other task.
    fn fields(&self, switched_out: bool) -> Vec<(&'static str, Shown<'_>)> {
        use Shown::{Hex, Text};
        let id = |n: u32| Hex(u64::from(n));
        match self {
            Body::Mmap {
                pid,
                tid,
                addr,
                len,
                pgoff,
                file,
                filename,
            } => {
                let mut fields = vec![
                    ("pid", id(*pid)),
                    ("tid", id(*tid)),
                    ("addr", Hex(*addr)),
                    ("len", Hex(*len)),
                    ("pgoff", Hex(*pgoff)),
                ];
                if let Some(file) = file {
                    fields.extend([
                        ("maj", id(file.maj)),
                        ("min", id(file.min)),
                        ("ino", Hex(file.ino)),
                        ("ino_generation", Hex(file.ino_generation)),
                        ("prot", id(file.prot)),
                        ("flags", id(file.flags)),
                    ]);
                }
                fields.push(("filename", Text(filename)));
                fields
            }
            Body::Lost { id: which, lost } => vec![("id", Hex(*which)), ("lost", Hex(*lost))],
            Body::Comm { pid, tid, comm } => {
                vec![("pid", id(*pid)), ("tid", id(*tid)), ("comm", Text(comm))]
            }
            Body::Task {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => vec![
                ("pid", id(*pid)),
                ("ppid", id(*ppid)),
                ("tid", id(*tid)),
                ("ptid", id(*ptid)),
                ("time", Hex(*time)),
            ],
            Body::Throttle {
                time,
                id: which,
                stream_id,
            } => vec![
                ("time", Hex(*time)),
                ("id", Hex(*which)),
                ("stream_id", Hex(*stream_id)),
            ],
            Body::Aux {
                offset,
                size,
                flags,
            } => vec![
                ("aux offset", Hex(*offset)),
                ("aux size", Hex(*size)),
                ("flags", Hex(*flags)),
            ],
            Body::ItraceStart { pid, tid } => vec![("pid", id(*pid)), ("tid", id(*tid))],
            Body::SwitchCpuWide { pid, tid } if switched_out => {
                vec![("next pid", id(*pid)), ("next tid", id(*tid))]
            }
            Body::SwitchCpuWide { pid, tid } => {
                vec![("prev pid", id(*pid)), ("prev tid", id(*tid))]
            }
            Body::LostSamples { lost } => vec![("lost", Hex(*lost))],
            Body::Switch | Body::Unknown => Vec::new(),
        }
    }
}

impl Sample {
    /// The samples a record carries, named as `--sb:verbose` prints them.
    fn fields(&self) -> Vec<(&'static str, u64)> {
        let mut fields = Vec::new();
        if let Some((pid, tid)) = self.pid_tid {
            fields.extend([("pid", u64::from(pid)), ("tid", u64::from(tid))]);
        }
        let rest = [
            ("time", self.time),
            ("id", self.id),
            ("cpu", self.cpu.map(u64::from)),
            ("stream id", self.stream_id),
            ("identifier", self.identifier),
        ];
        fields.extend(rest.into_iter().filter_map(|(name, v)| Some((name, v?))));
        fields
    }
}

/// ptdump's `--sb:compact`: the record's fields on one line (a task as
/// `pid/tid`), then its samples in braces.
impl Display for Record {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.body == Body::Unknown {
            write!(f, "UNKNOWN ({:x}, {:x})", self.kind, self.misc)?;
        } else {
            f.write_str(&self.name())?;
        }
        let mut fields = self.body.fields(self.is_switch_out());
        if let Body::Task { .. } = self.body {
            // pid/tid first, then ppid/ptid.
            fields.swap(1, 2);
        }
        let mut separator = "  ";
        for (name, value) in fields {
            if name.ends_with("tid") {
                write!(f, "/{value}")?;
            } else {
                write!(f, "{separator}{value}")?;
                separator = ", ";
            }
        }
        f.write_str("  {")?;
        for (name, value) in self.sample.fields() {
            match name {
                "tid" => write!(f, "/{value:x}")?,
                "cpu" => write!(f, " cpu-{value:x}")?,
                _ => write!(f, " {value:x}")?,
            }
        }
        f.write_str(" }")
    }
}

/// ptdump's `--sb:verbose`: one field per line.
pub struct Verbose<'a>(&'a Record);

impl Display for Verbose<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let record = self.0;
        f.write_str(&record.name())?;
        if record.body == Body::Unknown {
            write!(f, "\n  type: {:x}\n  misc: {:x}", record.kind, record.misc)?;
        }
        for (name, value) in record.body.fields(record.is_switch_out()) {
            write!(f, "\n  {name}: {value}")?;
        }
        for (name, value) in record.sample.fields() {
            write!(f, "\n  {name}: {value:x}")?;
        }
        Ok(())
    }
}

/// One sideband file being read: its records in file order, each once.
#[derive(Debug)]
pub struct Channel {
    /// The file's name as given, for messages.
    pub name: Rc<str>,
    file: Vec<u8>,
    config: Config,
    /// Records of the primary channel steer the decoder's image.
    pub primary: bool,
    next: usize,
}

impl Channel {
    pub fn new(name: &str, file: Vec<u8>, config: Config, primary: bool) -> Self {
        Channel {
            name: name.into(),
            file,
            config,
            primary,
            next: 0,
        }
    }

    /// The next record; `Err((offset, fault))` where one cannot be read
    /// (`Fault::End` at the end), after which the channel reads no more.
    pub fn next_record(&mut self) -> Result<Record, (usize, Fault)> {
        let at = self.next;
        match Record::read(&self.file, at, &self.config) {
            Ok((record, size)) => {
                self.next += size;
                Ok(record)
            }
            Err(fault) => {
                self.next = self.file.len();
                Err((at, fault))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `kind` with `body`, then `sample` (already encoded).
    fn record(kind: u32, misc: u16, body: &[u8], sample: &[u8]) -> Vec<u8> {
        let size = u16::try_from(8 + body.len() + sample.len()).unwrap();
        let mut bytes = kind.to_le_bytes().to_vec();
        bytes.extend(misc.to_le_bytes());
        bytes.extend(size.to_le_bytes());
        bytes.extend(body);
        bytes.extend(sample);
        bytes
    }

    fn mmap_body(name: &str) -> Vec<u8> {
        let mut body = [7u32.to_le_bytes(), 8u32.to_le_bytes()].concat();
        for value in [0x40_1000u64, 0x2000, 0x1000] {
            body.extend(value.to_le_bytes());
        }
        let mut name = name.as_bytes().to_vec();
        name.resize((name.len() + 1).next_multiple_of(8), 0);
        body.extend(name);
        body
    }

    fn config(sample_type: u64) -> Config {
        Config {
            sample_type,
            time_mult: 1,
            ..Config::default()
        }
    }

    #[test]
    fn an_mmap_reads_with_its_samples_and_prints_as_ptdump_does() {
        let sample = [
            [7u32.to_le_bytes(), 8u32.to_le_bytes()].concat(),
            0x30u64.to_le_bytes().to_vec(),
            [2u32.to_le_bytes(), 0u32.to_le_bytes()].concat(),
        ]
        .concat();
        let file = record(1, 2, &mmap_body("/bin/true"), &sample);
        let ty = sample::TID | sample::TIME | sample::CPU;
        let (record, size) = Record::read(&file, 0, &config(ty)).unwrap();
        assert_eq!(size, file.len());
        assert_eq!(record.tsc, 0x30);
        assert_eq!(
            record.to_string(),
            "PERF_RECORD_MMAP  7/8, 401000, 2000, 1000, /bin/true  { 7/8 30 cpu-2 }"
        );
        assert!(
            record
                .verbose()
                .to_string()
                .contains("\n  filename: /bin/true\n  pid: 7")
        );
    }

    #[test]
    fn an_mmap2_prints_its_file_identity_between_offset_and_name() {
        let mut body = mmap_body("/bin/true");
        let name = body.split_off(32);
        for word in [8u32, 1] {
            body.extend(word.to_le_bytes());
        }
        body.extend(0x2au64.to_le_bytes());
        body.extend(0u64.to_le_bytes());
        for word in [5u32, 2] {
            body.extend(word.to_le_bytes());
        }
        body.extend(name);
        let file = record(10, 0, &body, &[]);
        let (record, _) = Record::read(&file, 0, &config(0)).unwrap();
        assert_eq!(
            record.to_string(),
            "PERF_RECORD_MMAP2  7/8, 401000, 2000, 1000, 8, 1, 2a, 0, 5, 2, /bin/true  { }"
        );
        assert!(
            record
                .verbose()
                .to_string()
                .contains("\n  ino: 2a\n  ino_generation: 0\n")
        );
    }

    #[test]
    fn perf_time_becomes_tsc_through_the_mmap_page_conversion() {
        let config = Config {
            time_zero: 1000,
            time_shift: 4,
            time_mult: 3,
            ..Config::default()
        };
        // (time - zero) / mult << shift, with the remainder carried.
        assert_eq!(config.tsc(1000 + 30), Ok(160));
        assert_eq!(config.tsc(1000 + 31), Ok(165));
        assert_eq!(config.tsc(0), Ok(0), "perf's made-up records stay at 0");
        let no_mult = Config::default();
        assert_eq!(no_mult.tsc(5), Err(Fault::BadConfig));
    }

    #[test]
    fn damaged_records_name_what_is_wrong() {
        let good = record(1, 0, &mmap_body("a"), &[]);
        let cfg = config(0);
        // Cut short: the end of the file, as libipt reads it.
        assert_eq!(Record::read(&good[..20], 0, &cfg), Err(Fault::End));
        // A size smaller than the header.
        let mut small = good.clone();
        small[6] = 4;
        assert_eq!(Record::read(&small, 0, &cfg), Err(Fault::Nosync));
        // A size that leaves fields over.
        let mut long = good.clone();
        long.extend([0; 8]);
        long[6] += 8;
        assert_eq!(Record::read(&long, 0, &cfg), Err(Fault::Nosync));
        // A name without its NUL.
        let open = record(3, 0, &[1, 0, 0, 0, 1, 0, 0, 0, b'a', b'b', b'c', b'd'], &[]);
        assert_eq!(Record::read(&open, 0, &cfg), Err(Fault::BadPacket));
        // Samples the sample type promises but the record lacks.
        assert_eq!(
            Record::read(&good, 0, &config(sample::TIME)),
            Err(Fault::Nosync)
        );
    }

    #[test]
    fn a_channel_reads_each_record_once_and_stops_at_a_damaged_one() {
        let mut file = record(12, 0, &[1, 0, 0, 0, 1, 0, 0, 0], &[]);
        file.extend(record(14, 1 << 13, &[], &[]));
        let mut bad = record(2, 0, &[0; 16], &[]);
        bad[6] = 2;
        file.extend(bad);
        let mut channel = Channel::new("sb", file, config(0), true);
        let first = channel.next_record().unwrap();
        assert_eq!(first.to_string(), "PERF_RECORD_ITRACE_START  1/1  { }");
        let second = channel.next_record().unwrap();
        assert_eq!(
            (second.offset, second.to_string()),
            (16, "PERF_RECORD_SWITCH.OUT  { }".into())
        );
        assert_eq!(channel.next_record(), Err((24, Fault::Nosync)));
        assert_eq!(channel.next_record(), Err((48, Fault::End)));
    }

    #[test]
    fn records_of_several_events_take_the_sample_type_of_their_identifier() {
        let mut cfg = config(0);
        cfg.sample_types = vec![(9, sample::TIME | sample::IDENTIFIER)];
        let sample = [5u64.to_le_bytes(), 9u64.to_le_bytes()].concat();
        let file = record(13, 0, &3u64.to_le_bytes(), &sample);
        let (record, _) = Record::read(&file, 0, &cfg).unwrap();
        assert_eq!(record.to_string(), "PERF_RECORD_LOST_SAMPLES  3  { 5 9 }");
        cfg.sample_types = vec![(9, sample::TIME)];
        assert_eq!(Record::read(&file, 0, &cfg), Err(Fault::BadConfig));
    }
}
