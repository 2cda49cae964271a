//! Command-line arguments. These structs only parse and validate; `stat::StatPlan`
//! and friends resolve them into what the probes need.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};
use weft_capture::answer::AnswerFormat;

/// eBPF-first observability for Linux.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about, long_about = None)]
pub struct Cli {
    /// Without a command, weft opens the terminal UI on a live capture
    /// (`weft tui`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The terminal UI: live, or on a recording (`weft tui DIR`).
    ///
    /// Live, weft records into a capture of bounded size (a temporary one,
    /// removed on quit, unless -o keeps it) and shows per source the
    /// records/s, losses and a headline metric, per syscall the
    /// p50/p90/p99/p99.9/max latency over a sliding window, and answers the
    /// query language in its query bar (`:`). `?` lists the keys.
    Tui(TuiArgs),

    /// Count system calls and their latency percentiles, per syscall.
    ///
    /// Traces every completed system call on the machine (or those selected by
    /// the filters), pairs entry and exit in the kernel, and prints per syscall
    /// name the count, rate and p50/p90/p99/p99.9/max latency, and every event
    /// that was lost. Ctrl-C prints the final table and exits 0.
    Stat(StatArgs),

    /// Record every syscall to a capture directory, headless.
    ///
    /// Writes a weft store plus weft.json (host, kernel, sources, start and
    /// end, and what was lost, per CPU). A status line goes to stderr each
    /// second when it is a terminal. SIGINT or SIGTERM finish cleanly; a
    /// crash leaves a directory that still opens.
    Record(Box<RecordArgs>),

    /// Copy the window a trigger kept into a small standalone capture.
    ///
    /// Every source's records of that window (and the thread names noted
    /// before it), with the same indexes; `weft query OUT`, `weft tui OUT`
    /// and `weft info OUT` open it anywhere.
    Extract(ExtractArgs),

    /// Keep the window around now in the running `weft record` (its manual
    /// trigger, as SIGUSR2), with a note.
    Trigger(TriggerCmdArgs),

    /// List the event sources, their fields, and whether each can attach on
    /// this kernel (and why not).
    Sources(SourcesArgs),

    /// Summarise a capture directory: time range, sources, counts, losses, size.
    Info(InfoArgs),

    /// Verify every checksum of a capture directory and list what is
    /// damaged (file, offset, what); exits 1 when anything is.
    Check(InfoArgs),

    /// Check what this kernel and process offer weft: privileges, BTF,
    /// tracefs, tracepoints, kernel options, and a real load of the syscall
    /// probe. Exits 0 when weft can trace here, 1 when it cannot.
    Doctor(DoctorArgs),

    /// Ask a capture a question in weft's query language (docs/query.md).
    ///
    /// Examples:
    ///   weft query DIR 'syscalls where name = "sendto" | p99.99(dur) last 60s'
    ///   weft query DIR 'syscalls where name = "pread64" and dur > p99.99'
    ///   weft query DIR 'syscalls | count, p99(dur) by name | limit 10'
    ///
    /// Prints an aligned table, or JSON lines or CSV. A query error points at
    /// the offending token. Works while `weft record` is writing the capture.
    Query(QueryArgs),

    /// Compare two captures (or two windows of one) per syscall and per
    /// source: counts, rates and exact latency percentiles, B against A,
    /// what changed most first.
    ///
    /// Examples:
    ///   weft diff before/ after/
    ///   weft diff before/ after/ --fail-if 'p99(dur) > 1.2x' --fail-if 'rate < 0.5x'
    ///   weft diff cap/ --window '[FROM, TO]' --b-window 'last 60s'
    ///
    /// Exits 1 when B crosses a --fail-if threshold for any syscall (each
    /// crossing is said on stderr), 0 otherwise.
    Diff(DiffArgs),

    /// Run a bpftrace-style one-liner, with no compiler on the host.
    ///
    /// Prebuilt eBPF programs copy what the program reads; actions run in
    /// weft (see docs/oneliners.md and --explain). Maps print in bpftrace's
    /// layout on Ctrl-C, `exit()` or when the -c command ends; a last line on
    /// stderr says how many events were lost.
    #[command(after_help = TRACE_EXAMPLES)]
    Trace(TraceArgs),

    /// Write a capture for other tools: Parquet, JSON lines, CSV, a
    /// Perfetto timeline, flame graph stacks, pcapng (docs/exports.md).
    ///
    /// Parquet lets `DuckDB`, Spark, `ClickHouse` or pandas take over when a
    /// question outgrows one host. Columns are those `weft query` lists;
    /// durations and times are integer ns. The file appears only once
    /// complete (mode 0600).
    Export(ExportArgs),

    /// Print a shell completion script, e.g. `weft completions bash >
    /// /usr/share/bash-completion/completions/weft`.
    Completions(CompletionsArgs),

    /// Write man pages (weft.1 and weft-COMMAND.1) into a directory
    /// (`cargo xtask man` does).
    #[command(hide = true)]
    Man(ManArgs),

    /// Intel Processor Trace: list a trace's packets, walk its instruction
    /// flow, capture it (docs/pt.md).
    #[command(subcommand)]
    Pt(PtCommand),
}

/// Where the fleet's shared secret is looked for unless given.
pub const DEFAULT_PEER_SECRET: &str = "/etc/weft/peer.key";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: std::path::PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum PtCommand {
    /// List the packets of a raw PT stream, one per line, in the layout of
    /// libipt's ptdump. A decoding error is printed in brackets with its
    /// offset and the listing resumes at the next PSB; weft then exits 1.
    Dump(PtDumpArgs),

    /// Print the instructions a PT trace executed, one address per line,
    /// with events in brackets ([enabled], [interrupt], ...), as libipt's
    /// `ptxed --no-inst` does. Where the walk loses its way it prints the
    /// error with its offset, resumes at the next PSB, and weft exits 1.
    Flow(PtFlowShowArgs),

    /// The function calls a PT trace made, as an indented tree with each
    /// call's duration in TSC ticks (functions named from the ELF files'
    /// symbols), or with --summary calls and time per function.
    Calls(PtCallsArgs),

    /// Capture Intel PT of a process (needs PT hardware; on a CPU or VM
    /// without it, says so and exits 3). When `weft record` runs, the
    /// capture's calls are stored in its recording, as `weft pt import`
    /// does.
    Record(PtRecordArgs),

    /// Decode a `weft pt record` capture and store its calls in the
    /// recording `weft record` is making, as the `calls` source: queries
    /// and the UI's timeline then show them beside the syscalls of the
    /// same instant. Calls more than 10 minutes old are not stored.
    Import(PtImportArgs),

    /// What a perf.data file of `perf record -e intel_pt//` holds: the PT
    /// configuration, each AUX queue (a CPU's or a thread's trace) and the
    /// sideband (mappings, thread names, context switches).
    Perf(PtPerfArgs),
}

#[derive(Debug, Args)]
pub struct PtImportArgs {
    /// The capture directory `weft pt record` wrote.
    #[arg(value_name = "DIR")]
    pub capture: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct PtPerfArgs {
    /// The perf.data file.
    #[arg(value_name = "PERF_DATA")]
    pub file: std::path::PathBuf,
}

#[allow(
    clippy::struct_excessive_bools,
    reason = "ptxed's switches, one field each"
)]
#[derive(Debug, Args)]
pub struct PtFlowShowArgs {
    #[command(flatten)]
    pub flow: PtFlowArgs,

    /// Show the address each event happened at where the trace names one,
    /// as `ptxed --event:ip` does: `[ptwrite: 2a, ip: …]`, `[disabled, at:
    /// …, ip: …]`, `[interrupt, from: …, to: …]`.
    #[arg(long)]
    pub event_ips: bool,

    /// Report where interrupts were enabled and disabled (`[interrupts
    /// enabled]`), as event tracing's MODE.Exec packets say, as `ptxed
    /// --event:iflags` does.
    #[arg(long)]
    pub iflags: bool,

    /// After the flow, print how many instructions it ran (`insn: N.`, as
    /// `ptxed --stat`).
    #[arg(long)]
    pub stat: bool,

    /// Print only errors (and with --stat the count), as `ptxed --quiet`.
    #[arg(long)]
    pub quiet: bool,

    /// Report `[tick]` where a TNT or TIP packet moved the time, as `ptxed
    /// --event:tick` does.
    #[arg(long)]
    pub event_ticks: bool,

    /// Show each event's time in TSC ticks, where the trace has one, as
    /// `ptxed --event:time` does.
    #[arg(long)]
    pub event_times: bool,

    #[command(flatten)]
    pub sideband: SidebandArgs,
}

/// `perf_event` sideband, as libipt's tools read it: raw records of one
/// `perf_event` each (e.g. extracted from a perf.data file by libipt's
/// `perf-read-sideband.bash`), with the sample fields `--pevent-sample-type`
/// says. A flow takes each process's code from its MMAP records and follows
/// the processes the primary file says run; a listing shows the records
/// where the trace's time reaches them.
#[allow(
    clippy::struct_excessive_bools,
    reason = "ptxed's switches, one field each"
)]
#[derive(Debug, Args)]
pub struct SidebandArgs {
    /// The traced CPU's sideband (`ITRACE_START`, SWITCH, MMAP, ...).
    #[arg(long, value_name = "FILE", help_heading = "Sideband")]
    pub pevent_primary: Option<std::path::PathBuf>,

    /// Another CPU's sideband: its MMAP, FORK and COMM.EXEC records change
    /// the processes' code too. Repeatable.
    #[arg(long, value_name = "FILE", help_heading = "Sideband")]
    pub pevent_secondary: Vec<std::path::PathBuf>,

    /// `perf_event_attr.sample_type` of the records (hex with 0x).
    #[arg(long, value_name = "BITS", default_value = "0", value_parser = parse_number,
          help_heading = "Sideband")]
    pub pevent_sample_type: u64,

    /// `perf_event_mmap_page.time_zero`, to turn perf time into TSC.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_number,
          help_heading = "Sideband")]
    pub pevent_time_zero: u64,

    /// `perf_event_mmap_page.time_shift`.
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Sideband")]
    pub pevent_time_shift: u16,

    /// `perf_event_mmap_page.time_mult`.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "Sideband")]
    pub pevent_time_mult: u32,

    /// Apply records this many TSC ticks early.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_number,
          help_heading = "Sideband")]
    pub pevent_tsc_offset: u64,

    /// Where kernel addresses start: a process switch waits until the trace
    /// is in the kernel (or tracing is off).
    #[arg(long, value_name = "ADDR", value_parser = parse_number, help_heading = "Sideband")]
    pub pevent_kernel_start: Option<u64>,

    /// Read the files MMAP records name under this directory.
    #[arg(long, value_name = "DIR", help_heading = "Sideband")]
    pub pevent_sysroot: Option<std::path::PathBuf>,

    /// Show each record on one line.
    #[arg(long, help_heading = "Sideband")]
    pub sb_compact: bool,

    /// Show each record with one field per line.
    #[arg(long, conflicts_with = "sb_compact", help_heading = "Sideband")]
    pub sb_verbose: bool,

    /// Show the file before each record.
    #[arg(long, help_heading = "Sideband")]
    pub sb_filename: bool,

    /// Show each record's offset in its file.
    #[arg(long, help_heading = "Sideband")]
    pub sb_offset: bool,

    /// Show each record's time in TSC ticks.
    #[arg(long, help_heading = "Sideband")]
    pub sb_time: bool,

    /// Show `[context: pid-N]` where the flow takes another process's code.
    #[arg(long, help_heading = "Sideband")]
    pub sb_switch: bool,

    /// Show warnings about the sideband (lost records, code that cannot be
    /// had), not only errors.
    #[arg(long, help_heading = "Sideband")]
    pub sb_warn: bool,
}

#[derive(Debug, Args)]
pub struct PtCallsArgs {
    #[command(flatten)]
    pub flow: PtFlowArgs,

    /// Print calls, total and own time per function, most own time first,
    /// instead of the tree.
    #[arg(long)]
    pub summary: bool,

    #[command(flatten)]
    pub clocks: ClockArgs,
}

#[derive(Debug, Args)]
pub struct PtFlowArgs {
    /// The raw PT byte stream, a `weft pt record` capture directory (each
    /// CPU's trace, decoded with the traced process's code, times in
    /// `CLOCK_MONOTONIC` ns as `weft record` keeps them), or with --perf a
    /// perf.data file.
    #[arg(value_name = "TRACE")]
    pub trace: std::path::PathBuf,

    /// Code the trace ran: an ELF file (mapped at its segments' addresses)
    /// or `FILE:ADDR` for a raw binary loaded at hex ADDR. Repeatable.
    #[arg(long, value_name = "FILE[:ADDR]")]
    pub image: Vec<String>,

    /// A process's memory map (`/proc/PID/maps`, or the `maps` of a `weft
    /// pt record` capture): its executable files, mapped where the process
    /// had them, with their symbols there.
    #[arg(long, value_name = "FILE")]
    pub maps: Option<std::path::PathBuf>,

    /// The CPU that recorded the trace, for its errata (e.g. 6/85).
    #[arg(long, value_name = "FAMILY/MODEL[/STEPPING]")]
    pub cpu: Option<weft_pt::Cpu>,

    /// An address range tracing was limited to (an `IA32_RTIT_ADDRn`
    /// filter), hex, inclusive; repeatable. Erratum SKL014 needs it.
    #[arg(long, value_name = "START-END", value_parser = parse_range)]
    pub addr_filter: Vec<(u64, u64)>,

    /// After a decoding error, go on from the next packet that says where
    /// the code is (a TIP, a FUP, an event naming an IP) instead of from the
    /// next PSB, as `ptxed --resync-on-error` does: less of the trace is lost.
    #[arg(long)]
    pub resync_on_error: bool,

    /// TRACE is a perf.data file of `perf record -e intel_pt//`: decode
    /// each AUX queue with the executable mappings its process had (files
    /// read from where they were mapped).
    #[arg(long, conflicts_with_all = ["image", "maps"])]
    pub perf: bool,

    /// With --perf, the process whose mappings decode per-CPU queues
    /// (`perf record -a`); per-thread queues use their thread's process.
    #[arg(long, value_name = "PID", requires = "perf")]
    pub pid: Option<i32>,

    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// Where function names come from.
#[derive(Debug, Args)]
pub struct SymbolArgs {
    /// Look for separate debug files here (as `DIR/.build-id/ab/cdef.debug`
    /// and by `.gnu_debuglink`) before /usr/lib/debug. Repeatable.
    #[arg(long, value_name = "DIR", help_heading = "Symbols")]
    pub debug_dir: Vec<std::path::PathBuf>,

    /// Print function names as the symbol tables store them (`_ZN…`,
    /// `_R…`), not demangled.
    #[arg(long, help_heading = "Symbols")]
    pub no_demangle: bool,
}

impl SymbolArgs {
    pub fn finder(&self) -> weft_symbols::Finder {
        weft_symbols::Finder::new(self.debug_dir.clone(), !self.no_demangle)
    }
}

#[derive(Debug, Args)]
pub struct PtRecordArgs {
    /// Trace the CPUs this process may run on.
    #[arg(
        long,
        value_name = "PID",
        required_unless_present = "cgroup",
        conflicts_with = "cgroup"
    )]
    pub pid: Option<u32>,

    /// Trace the CPUs of this cgroup (v2) directory's cpuset.
    #[arg(long, value_name = "DIR")]
    pub cgroup: Option<std::path::PathBuf>,

    /// How long to trace: 100ms to 2s.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration)]
    pub duration: std::time::Duration,

    /// PT buffer per CPU: 4MiB to 128MiB (rounded down to a power of two).
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_size)]
    pub size: u64,

    /// PT buffers across all CPUs at most; the size per CPU shrinks to fit.
    #[arg(long, value_name = "SIZE", default_value = "512MiB", value_parser = parse_size)]
    pub budget: u64,

    /// Keep overwriting the oldest trace when a buffer is full, rather than
    /// stop writing (the last part of the window survives).
    #[arg(long)]
    pub snapshot: bool,

    /// Trace kernel code too.
    #[arg(long)]
    pub kernel: bool,

    /// Where to write the capture (a new directory): cpuN.pt per CPU,
    /// capture.json, and the process's maps.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: std::path::PathBuf,
}

#[allow(
    clippy::struct_excessive_bools,
    reason = "ptdump's switches, one field each"
)]
#[derive(Debug, Args)]
pub struct PtDumpArgs {
    /// The raw PT byte stream (e.g. the AUX data of one CPU).
    #[arg(value_name = "TRACE")]
    pub trace: std::path::PathBuf,

    /// Omit each packet's offset.
    #[arg(long)]
    pub no_offset: bool,

    /// Decode from byte 0 instead of the first PSB.
    #[arg(long)]
    pub no_sync: bool,

    /// Show each packet's bytes in hex.
    #[arg(long)]
    pub raw: bool,

    /// Show the full IP of each IP packet (FUP, TIP, TIP.PGE, TIP.PGD), its
    /// compression undone against the last IP.
    #[arg(long)]
    pub lastip: bool,

    /// Show the execution mode each MODE.Exec sets.
    #[arg(long)]
    pub exec_mode: bool,

    /// The CPU that recorded the trace, for its errata (e.g. 6/85).
    #[arg(long, value_name = "FAMILY/MODEL[/STEPPING]")]
    pub cpu: Option<weft_pt::Cpu>,

    /// An address range tracing was limited to (an `IA32_RTIT_ADDRn`
    /// filter), hex, inclusive; repeatable. Erratum SKL014 needs it.
    #[arg(long, value_name = "START-END", value_parser = parse_range)]
    pub addr_filter: Vec<(u64, u64)>,

    #[command(flatten)]
    pub time: TimeArgs,

    #[command(flatten)]
    pub clocks: ClockArgs,

    #[command(flatten)]
    pub sideband: SidebandArgs,
}

/// The time column of `weft pt dump`.
#[allow(
    clippy::struct_excessive_bools,
    reason = "ptdump's switches, one field each"
)]
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("column").args(["time", "tcal"]).multiple(true)))]
pub struct TimeArgs {
    /// Show the time (TSC ticks) next to each timing packet.
    #[arg(long)]
    pub time: bool,

    /// Show the calibrated ratio of TSC ticks per core cycle (which times
    /// CYC packets) next to the packets that calibrate it: TSC, CBR, MTC.
    #[arg(long)]
    pub tcal: bool,

    /// With --time or --tcal: show the change since the last value shown.
    #[arg(long, requires = "column")]
    pub time_delta: bool,

    /// With --time: count from 0 where the trace has no TSC yet.
    #[arg(long, requires = "time")]
    pub no_wall_clock: bool,
}

/// What a PT trace does not say about the clocks that recorded it (perf
/// keeps these next to the trace; the names are ptdump's).
#[derive(Debug, Args)]
pub struct ClockArgs {
    /// log2 of the crystal-clock ticks between MTC packets (the capture's
    /// `mtc_period`).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=15))]
    pub mtc_freq: u8,

    /// The CPU's nominal core:bus ratio, to turn CBR packets into cycle
    /// times.
    #[arg(long, value_name = "RATIO", default_value_t = 0)]
    pub nom_freq: u8,

    /// CPUID leaf 0x15 EAX: the TSC advances EBX/EAX ticks per crystal
    /// tick.
    #[arg(long = "cpuid-0x15.eax", value_name = "EAX", default_value_t = 0)]
    pub ctc_eax: u32,

    /// CPUID leaf 0x15 EBX (see --cpuid-0x15.eax).
    #[arg(long = "cpuid-0x15.ebx", value_name = "EBX", default_value_t = 0)]
    pub ctc_ebx: u32,

    /// Do not calibrate cycle counts from the trace.
    #[arg(long)]
    pub no_tcal: bool,

    /// Ignore CYC packets.
    #[arg(long)]
    pub no_cyc: bool,

    /// Keep the cycle calibration across an overflow.
    #[arg(long)]
    pub keep_tcal_on_ovf: bool,
}

impl ClockArgs {
    pub fn clocks(&self) -> weft_pt::time::Clocks {
        weft_pt::time::Clocks {
            mtc_freq: self.mtc_freq,
            ctc_eax: self.ctc_eax,
            ctc_ebx: self.ctc_ebx,
            nom_freq: self.nom_freq,
            calibrate: !self.no_tcal,
            cycles: !self.no_cyc,
            keep_calibration_on_overflow: self.keep_tcal_on_ovf,
        }
    }
}

const TRACE_EXAMPLES: &str = "Examples:
  weft trace 'tracepoint:syscalls:sys_enter_openat { printf(\"%s %s\\n\", comm, str(args.filename)); }'
  weft trace 'tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }'
  weft trace -c 'dd if=/dev/zero of=/dev/null count=100' \\
    'tracepoint:syscalls:sys_exit_read /pid == cpid/ { @ = percentiles(args.ret); }'";

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The program, in bpftrace's language (docs/oneliners.md), or a file
    /// holding one (a script such as bpftrace's tools; `-` reads it from
    /// stdin); then the program's
    /// positional parameters, `$1`, `$2`, ... (after `--` if one starts
    /// with `-`).
    #[arg(value_name = "PROGRAM", required_unless_present_any = ["expression", "list"])]
    pub words: Vec<String>,

    /// The program, spelled as bpftrace's -e; every PROGRAM word is then a
    /// positional parameter.
    #[arg(short = 'e', value_name = "PROGRAM")]
    pub expression: Option<String>,

    /// Run this command (split on blanks), trace while it runs, and stop
    /// when it exits; `cpid` is its pid.
    #[arg(short = 'c', long, value_name = "COMMAND", help_heading = "Tracing")]
    pub command: Option<String>,

    /// Trace until process PID exits (as bpftrace's `-p`; probes still fire
    /// for every process, as bpftrace 0.17's do: test `pid` to keep its).
    #[arg(
        short = 'p',
        long,
        value_name = "PID",
        conflicts_with = "command",
        value_parser = parse_pid,
        help_heading = "Tracing"
    )]
    pub pid: Option<u32>,

    #[command(flatten)]
    pub list: ListArgs,

    /// Let the program run commands through `system()` and send signals
    /// with `signal()`, as bpftrace's --unsafe does.
    #[arg(long = "unsafe", help_heading = "Tracing")]
    pub unsafe_calls: bool,

    /// Write the program's output (printf, maps) to this file, mode 0600,
    /// instead of stdout, as bpftrace's -o (`-`: stdout).
    #[arg(short = 'o', long, value_name = "FILE", help_heading = "Output")]
    pub output: Option<std::path::PathBuf>,

    /// Print nothing but the program's output and any losses (no
    /// "Attaching" line, no event count when none was lost).
    #[arg(short = 'q', long, help_heading = "Output")]
    pub quiet: bool,

    /// Output format.
    #[arg(
        short = 'f',
        long,
        value_enum,
        default_value = "text",
        help_heading = "Output"
    )]
    pub format: TraceFormat,

    /// Print the probes, what the kernel copies and tests for each, and what
    /// runs in weft; then exit without tracing.
    #[arg(long, help_heading = "Output")]
    pub explain: bool,

    /// Ring buffer size per CPU (e.g. 16MiB); rounded up to a power of two.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "8MiB",
        value_parser = parse_size,
        help_heading = "Tracing"
    )]
    pub ring_size: u64,

    /// Also keep every event whose predicate held in this capture directory
    /// (new or empty), one source per probe, for `weft query`.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub store: Option<std::path::PathBuf>,

    /// Run the program over what a capture recorded instead of the running
    /// kernel, in recorded time ("what would it have said then"): its
    /// system calls as the `syscalls` and `raw_syscalls` tracepoints (with
    /// the descriptor and byte count where it has `args`), context switches
    /// as `sched:sched_switch`, block requests as `block:block_rq_issue`
    /// and `block_rq_complete`, packets as `net:netif_receive_skb` and
    /// `net:net_dev_queue`, applications' records as `app:SOURCE`.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["command", "pid", "store"],
        help_heading = "Past"
    )]
    pub from: Option<std::path::PathBuf>,

    /// With --from, over the window kept around this trigger firing
    /// (1-based, as `weft query DIR triggers` lists them).
    #[arg(long, value_name = "N", requires = "from", help_heading = "Past")]
    pub trigger: Option<usize>,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub bpftrace: BpftraceArgs,
}

/// bpftrace's options that weft takes for scripts and habits written for
/// bpftrace: each does what it does there, or what it asks for is what
/// weft does anyway (docs/oneliners.md, "Options").
#[derive(Debug, Args)]
pub struct BpftraceArgs {
    /// As bpftrace's -B (`line`, `full` or `none`): weft writes what the
    /// program printed once per drain of the rings, never holding it
    /// longer, in one write.
    #[arg(short = 'B', value_name = "MODE", value_parser = ["line", "full", "none"], help_heading = "Output")]
    pub buffering: Option<String>,

    /// Print no warnings, as bpftrace's --no-warnings.
    #[arg(long, help_heading = "Output")]
    pub no_warnings: bool,

    /// As bpftrace's -k and -kk: warn, where in the program, when a map
    /// helper fails (-k: a delete of a missing key; -kk: a read of one too).
    /// weft always says what it dropped (a full map's keys, a full ring's
    /// events); a failed kernel read reads 0 without a warning.
    #[arg(short = 'k', action = clap::ArgAction::Count, help_heading = "Output")]
    pub helper_errors: u8,

    /// As bpftrace's -d and -dd (dry run, debug output): what --explain
    /// prints, then exit without tracing.
    #[arg(short = 'd', action = clap::ArgAction::Count, help_heading = "Output")]
    pub debug: u8,

    /// As bpftrace's -I (a directory of headers) and --include (a header
    /// included first): weft reads types from the kernel's BTF, as
    /// bpftrace does where it has BTF, so headers add nothing; accepted.
    #[arg(short = 'I', value_name = "DIR", help_heading = "Probes")]
    pub include_dirs: Vec<std::path::PathBuf>,

    /// See -I.
    #[arg(long = "include", value_name = "FILE", help_heading = "Probes")]
    pub includes: Vec<std::path::PathBuf>,

    /// As bpftrace's --usdt-file-activation: weft counts a USDT probe's
    /// semaphore in every process running its file already.
    #[arg(long, help_heading = "Probes")]
    pub usdt_file_activation: bool,
}

/// `weft trace -l`: probes listed instead of traced.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the probes this kernel offers that match the search PROGRAM
    /// names (a glob: `tracepoint:syscalls:sys_enter_open*`, `*sleep*`;
    /// all without one; `usdt:PATH:*` for a program's or library's USDT
    /// probes), or with -e the probes the program attaches; then exit.
    #[arg(short = 'l', long = "list", help_heading = "Probes")]
    pub list: bool,

    /// With -l, each tracepoint's fields too; when tracing, as bpftrace's
    /// -v, what --explain prints, on stderr, before the probes attach.
    #[arg(short = 'v', long = "verbose", help_heading = "Probes")]
    pub verbose: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// bpftrace's text layout.
    Text,
    /// One JSON object per line, as bpftrace -f json.
    Json,
    /// Maps as folded stacks for flame graph tools (`@[kstack] = count()`
    /// becomes `outer;...;inner COUNT`).
    Folded,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The capture directory.
    #[arg(value_name = "DIR")]
    pub dir: std::path::PathBuf,

    /// The file to write (`-`: standard output).
    #[arg(long, short = 'o', value_name = "FILE", help_heading = "Output")]
    pub output: std::path::PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "parquet", help_heading = "Output")]
    pub format: ExportFormat,

    /// The source to export.
    #[arg(long, default_value = "syscalls", help_heading = "Selection")]
    pub source: String,

    /// Only records for which this query condition holds, e.g. 'name = "read"'.
    #[arg(long = "where", value_name = "CONDITION", help_heading = "Selection")]
    pub condition: Option<String>,

    /// Only this time window, in query syntax: 'last 60s', '[now-80s, now-20s]'.
    #[arg(long, value_name = "WINDOW", help_heading = "Selection")]
    pub window: Option<String>,

    /// Answer from the intact part of a damaged capture: leave out its
    /// damaged chunks and say on stderr how many records and which times
    /// they held (without it, damage is an error).
    #[arg(long, help_heading = "Selection")]
    pub skip_damaged: bool,

    /// Parquet in Hive-style partitions under the -o directory,
    /// `host=H/source=S/date=YYYY-MM-DD/hour=HH/` (UTC), with the host in
    /// every row: many hosts' exports in one place read as one table.
    #[arg(long, help_heading = "Output")]
    pub partition: bool,

    /// The host the partitions name (default: the host that recorded).
    #[arg(
        long,
        value_name = "NAME",
        requires = "partition",
        help_heading = "Output"
    )]
    pub host: Option<String>,

    /// How Parquet's column chunks are compressed: zstd (smallest, the
    /// default), snappy (faster, larger) or none.
    #[arg(long, value_enum, default_value = "zstd", help_heading = "Output")]
    pub compression: ExportCompression,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportCompression {
    Zstd,
    Snappy,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Apache Parquet, one row group per million rows.
    Parquet,
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header line.
    Csv,
    /// pcapng of the net source's packets (headers and --snaplen bytes),
    /// for Wireshark and tshark.
    Pcapng,
    /// Folded stacks of the calls source (PT call traces) for flame graph
    /// tools: `pid P/tid T;outer;...;inner NS` with each path's own time.
    Folded,
    /// A Perfetto trace (protobuf) of every source over --window: threads'
    /// syscalls, off-CPU time and PT calls as slices, block requests,
    /// packets, page-cache events and triggers.
    Perfetto,
}

#[derive(Debug, Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent command-line flags"
)]
pub struct QueryArgs {
    /// The capture directory, then the query, e.g. 'syscalls | p99(dur) by
    /// name last 60s'. With --live, only the query.
    #[arg(value_name = "DIR QUERY", required = true, num_args = 1..=2)]
    pub args: Vec<String>,

    /// Ask the running `weft record` (through its root-only socket) instead
    /// of a directory: "now" is the present, data is at most a second old.
    #[arg(long, help_heading = "Source", conflicts_with = "fleet")]
    pub live: bool,

    /// Answer over many hosts' captures at once, as if one capture held
    /// all their records (then give only the query): each host sends its
    /// aggregates and only the values inside a quantile's bin, so
    /// percentiles are exact. --explain says what each host sent.
    /// Each is a capture directory or a running recorder's peer address
    /// (`HOST:PORT` of its --peer-listen), asked with --peer-secret.
    #[arg(
        long,
        value_name = "DIR|ADDR,...",
        value_delimiter = ',',
        help_heading = "Source",
        conflicts_with = "full_scan"
    )]
    pub fleet: Vec<String>,

    /// The file of the secret the fleet's hosts share (see --peer-listen
    /// of `weft record`): root's or yours, mode 0600.
    #[arg(
        long,
        value_name = "FILE",
        default_value = DEFAULT_PEER_SECRET,
        help_heading = "Source"
    )]
    pub peer_secret: PathBuf,

    /// One JSON object per row; durations and times as integer ns.
    #[arg(long, help_heading = "Output", conflicts_with = "csv")]
    pub json: bool,

    /// CSV with a header line; durations and times as integer ns.
    #[arg(long, help_heading = "Output")]
    pub csv: bool,

    /// Print how the query was answered (indexes, chunks read, time) instead of its rows.
    #[arg(long, help_heading = "Output")]
    pub explain: bool,

    /// Ignore indexes and summaries: read every record of the window (to
    /// measure what the indexes save; the answer is the same).
    #[arg(long, help_heading = "Source")]
    pub full_scan: bool,

    /// Over the window kept around this trigger firing (1-based, as `weft
    /// query DIR triggers` lists them). Without a query: the firing's
    /// trigger condition `| explain`, where its calls' time went.
    #[arg(
        long,
        value_name = "N",
        help_heading = "Source",
        conflicts_with_all = ["live", "fleet", "full_scan"]
    )]
    pub trigger: Option<usize>,

    /// Answer from the intact part of a damaged capture: leave out its
    /// damaged chunks and say on stderr how many records and which times
    /// they held (without it, damage is an error).
    #[arg(long, help_heading = "Source")]
    pub skip_damaged: bool,
}

impl QueryArgs {
    /// The output format the flags choose.
    pub fn format(&self) -> AnswerFormat {
        match (self.explain, self.json, self.csv) {
            (true, _, _) => AnswerFormat::Explain,
            (_, true, _) => AnswerFormat::Json,
            (_, _, true) => AnswerFormat::Csv,
            _ => AnswerFormat::Table,
        }
    }
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// What to record, comma-separated: syscalls, the sources `weft
    /// sources` lists (sched, block, pagecache, net, switch, conns, stacks, args), app
    /// (records pushed by programs through /run/weft/app.sock), or `all`.
    /// Syscalls alone by default, where the live UI (`weft`) takes
    /// syscalls, sched, block and pagecache to fill its views: a recording
    /// left running spends its disk budget on what was asked for, and a
    /// syscall flood alone is what one core can keep whole. conns (which
    /// thread used which connection) comes with net unless `-conns`.
    #[arg(
        long,
        value_name = "SOURCES",
        value_delimiter = ',',
        default_value = "syscalls",
        allow_hyphen_values = true,
        help_heading = "Sources"
    )]
    pub sources: Vec<String>,
    /// Let this group's members push application records (`--sources app`);
    /// by default only root may.
    #[arg(long, value_name = "GROUP", help_heading = "Sources")]
    pub app_group: Option<String>,
    /// Network interfaces the net source attaches to (default: every
    /// interface that is up, `lo` included).
    #[arg(
        long,
        value_name = "IF",
        value_delimiter = ',',
        help_heading = "Packets"
    )]
    pub interface: Vec<String>,
    /// Only packets from or to these ports (net source).
    #[arg(
        long,
        value_name = "PORT",
        value_delimiter = ',',
        help_heading = "Packets"
    )]
    pub port: Vec<u16>,
    /// Only packets from or to these IPv4 or IPv6 addresses (net source).
    #[arg(
        long,
        value_name = "ADDR",
        value_delimiter = ',',
        help_heading = "Packets"
    )]
    pub addr: Vec<std::net::IpAddr>,
    /// Keep each packet's first BYTES bytes of transport payload, up to
    /// 1024 (net source; queries list them as `data`).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        value_parser = clap::value_parser!(u32).range(0..=weft_abi::net::MAX_SNAPLEN as i64),
        help_heading = "Packets"
    )]
    pub snaplen: u32,
    /// Samples per second per CPU of the stacks source (a CPU profile;
    /// with sched, each thread's stacks as it leaves the CPU come too).
    #[arg(
        long,
        value_name = "HZ",
        default_value_t = weft_abi::stacks::DEFAULT_HZ,
        value_parser = clap::value_parser!(u64).range(1..=1000),
        help_heading = "Sources"
    )]
    pub stack_hz: u64,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub output: RecordOutputArgs,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Serve Prometheus metrics on `http://ADDR/metrics` (e.g.
    /// 127.0.0.1:9464): records and losses per source, and each syscall's
    /// exact latency quantiles over --metrics-window.
    #[arg(long, value_name = "ADDR", help_heading = "Metrics")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Answer other hosts' `weft query --fleet` on this capture at ADDR
    /// (e.g. 10.0.0.5:9465), and keep the windows their triggers fire
    /// for: requests and replies signed with --peer-secret, nothing served
    /// to anyone without it. A trigger firing here asks the recorders at
    /// the other ends of the firing thread's connections (the `conns`
    /// source) to keep the same window.
    #[arg(long, value_name = "ADDR", help_heading = "Peers")]
    pub peer_listen: Option<std::net::SocketAddr>,
    /// A recorder to ask when a firing thread's connection goes to its
    /// address (repeatable); a connection to another address goes to
    /// that address on --peer-listen's port.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "peer_listen",
        help_heading = "Peers"
    )]
    pub peer: Vec<std::net::SocketAddr>,
    /// How many hops a firing travels from host to host.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 3,
        requires = "peer_listen",
        help_heading = "Peers"
    )]
    pub peer_hops: u32,
    /// The file of the secret the fleet's hosts share, root's and mode
    /// 0600 (make one with `head -c 32 /dev/urandom | base64 > FILE`).
    #[arg(
        long,
        value_name = "FILE",
        default_value = DEFAULT_PEER_SECRET,
        help_heading = "Peers"
    )]
    pub peer_secret: PathBuf,
    /// The window the metrics' latency quantiles cover, e.g. 15s.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15s",
        value_parser = parse_duration,
        requires = "metrics",
        help_heading = "Metrics"
    )]
    pub metrics_window: Duration,
}

#[derive(Debug, Args)]
pub struct TuiArgs {
    /// A capture directory to open instead of capturing live (no root
    /// needed); `[` and `]` move its time cursor.
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Sources of a live capture (`weft sources` lists them; `net` attaches
    /// a classifier to every interface that is up).
    #[arg(
        long,
        value_name = "SOURCES",
        value_delimiter = ',',
        default_value = "syscalls,sched,block,pagecache",
        help_heading = "Live capture"
    )]
    pub sources: Vec<String>,
    /// Keep the live capture in this directory (default: a temporary one,
    /// removed on quit).
    #[arg(long, short = 'o', value_name = "DIR", help_heading = "Live capture")]
    pub output: Option<std::path::PathBuf>,
    /// Keep about this much of the most recent time.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration, help_heading = "Live capture")]
    pub retain: Duration,
    /// Keep the live capture under this size, deleting the oldest data first.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size, help_heading = "Live capture")]
    pub max_disk: u64,
    /// Keep the summaries of what --retain and --max-disk delete this long:
    /// the 1h window answers from them where the records are gone (marked
    /// approximate).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration, help_heading = "Live capture")]
    pub retain_summaries: Duration,
    /// Play this recording as a live capture, its records arriving now at
    /// the recorded pace (times --speed); no root needed.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "dir",
        help_heading = "Replay"
    )]
    pub replay: Option<std::path::PathBuf>,
    /// Several hosts' captures as one (e.g. the windows `weft extract
    /// --fleet` kept of a firing): the first one's sources as they are,
    /// the others' as `HOST:source`, all on the first one's clock.
    #[arg(
        long,
        value_name = "DIR,DIR,...",
        value_delimiter = ',',
        conflicts_with_all = ["dir", "replay"],
        num_args = 1,
        help_heading = "Recordings"
    )]
    pub fleet: Vec<std::path::PathBuf>,
    /// Times the recorded pace (e.g. 3 plays a 1.3 M records/s recording
    /// at 4 M records/s).
    #[arg(
        long,
        value_name = "FACTOR",
        default_value_t = 1.0,
        requires = "replay",
        help_heading = "Replay"
    )]
    pub speed: f64,
    /// Start over at the end of the recording, until the UI quits (else it
    /// quits at the end, as a live capture that stops).
    #[arg(long = "loop", requires = "replay", help_heading = "Replay")]
    pub repeat: bool,
    /// Read a damaged recording (DIR or --replay) anyway, leaving out its
    /// damaged chunks; stderr says how many records and which times.
    #[arg(long, help_heading = "Replay")]
    pub skip_damaged: bool,
    /// On quit, print how many frames were drawn and how long they took
    /// (median, max), as `cargo xtask bench tui` reads.
    #[arg(long, help_heading = "Output")]
    pub frame_stats: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub capture: CaptureArgs,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Recording")]
#[command(group(clap::ArgGroup::new("ring").args(["max_disk", "retain"]).multiple(true)))]
pub struct RecordOutputArgs {
    /// The capture directory to write (created with mode 0700).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: std::path::PathBuf,

    /// Stop after this long (e.g. 30s, 10m); default: until SIGINT/SIGTERM.
    #[arg(long, short = 'd', value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Keep the capture under this size, deleting the oldest data first.
    ///
    /// Deletion works in segments of the record log; pinned windows are kept.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_disk: Option<u64>,

    /// Keep only about this much of the most recent time (e.g. 10m), deleting older data.
    ///
    /// A ring: deletion works in segments of the record log (so a little
    /// more is kept); pinned windows are kept.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retain: Option<Duration>,

    /// Keep the summaries of what `--retain`/`--max-disk` delete this long (e.g. 7d).
    ///
    /// Questions over times whose records are gone are then answered from
    /// them, approximately (counts and sums exact over whole summaries;
    /// times to within the summaries' span, which grows with their age;
    /// percentiles to within a bin), and say so. They take at most 10 % of
    /// --max-disk. Default: summaries go with their records.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "ring")]
    pub retain_summaries: Option<Duration>,

    /// Add a session to an existing capture instead of refusing it.
    #[arg(long)]
    pub append: bool,

    #[command(flatten)]
    pub triggers: TriggerArgs,
}

/// Triggers: keep the windows around anomalies (docs/triggers.md).
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Triggers")]
pub struct TriggerArgs {
    /// Keep the window around every record for which this holds, whatever
    /// `--retain`/`--max-disk` delete, e.g. 'syscalls where name = "fsync"
    /// and dur > 50ms' or 'requests where latency > p99.99 last 1m'.
    /// Repeatable. SIGUSR2 keeps the window around now.
    #[arg(long = "trigger", value_name = "SOURCE where CONDITION")]
    pub conditions: Vec<String>,

    /// The window a trigger keeps, around the matching record's arrival.
    #[arg(long, value_name = "-BEFORE..+AFTER", default_value = "-30s..+10s", value_parser = parse_keep, allow_hyphen_values = true)]
    pub keep: (Duration, Duration),

    /// Each trigger fires at most N times per period (matches inside its
    /// current window only extend it).
    #[arg(long, value_name = "N/PERIOD", default_value = "10/1h", value_parser = parse_rate)]
    pub max_triggers: (usize, Duration),

    /// Run this shell command at each firing, with `WEFT_TRIGGER_ID`,
    /// `_CONDITION`, `_TIME_NS`, `_START_NS`, `_END_NS`, `_NOTE` and
    /// `WEFT_CAPTURE` in its environment (e.g. to page someone).
    #[arg(long, value_name = "COMMAND")]
    pub on_trigger: Option<String>,

    /// At each firing, capture Intel PT of the process whose record matched
    /// for DURATION (default 200ms) into `pt-ID-TIME_NS` in the capture
    /// (`weft pt calls DIR` decodes it). Where PT is absent weft says so at
    /// start, and triggers keep their windows without it.
    #[arg(long, value_name = "DURATION", num_args = 0..=1,
          default_missing_value = "200ms", value_parser = parse_pt_window)]
    pub pt_on_trigger: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// One JSON object per check (`check`, `ok`: true, false or null when
    /// it could not tell, `detail`), as `sources --json` lists sources.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// The capture the trigger fired in.
    #[arg(value_name = "DIR", required_unless_present = "fleet")]
    pub dir: Option<std::path::PathBuf>,
    /// Which firing, counting from 1 as `weft query DIR triggers` lists
    /// them.
    #[arg(
        long,
        value_name = "N",
        help_heading = "Window",
        required_unless_present = "fleet"
    )]
    pub trigger: Option<usize>,
    /// The captures of a fleet (each host's, copied here or reachable): the
    /// window each kept for --firing goes into OUT/NAME, NAME the capture
    /// directory's own, so `weft query --fleet OUT/a,OUT/b` asks them as one.
    #[arg(
        long,
        value_name = "DIR,...",
        value_delimiter = ',',
        requires = "firing",
        conflicts_with_all = ["dir", "trigger"],
        help_heading = "Window"
    )]
    pub fleet: Vec<std::path::PathBuf>,
    /// A firing that traveled, by the id `weft info` lists (`to peer ...
    /// firing ID`, `from peer`).
    #[arg(long, value_name = "ID", help_heading = "Window")]
    pub firing: Option<String>,
    /// The new capture directory (must not exist).
    #[arg(long, short = 'o', value_name = "OUT", help_heading = "Output")]
    pub output: std::path::PathBuf,

    /// Answer from the intact part of a damaged capture: leave out its
    /// damaged chunks and say on stderr how many records and which times
    /// they held (without it, damage is an error).
    #[arg(long, help_heading = "Window")]
    pub skip_damaged: bool,
}

#[derive(Debug, Args)]
pub struct TriggerCmdArgs {
    /// The capture being recorded (default: whatever the running `weft
    /// record` records).
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// Why: kept in the capture's weft.json and shown by `weft info`.
    #[arg(long, value_name = "TEXT", help_heading = "Trigger")]
    pub note: Option<String>,
}

#[derive(Debug, Args)]
pub struct SourcesArgs {
    /// One JSON object per source.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The capture directory.
    #[arg(value_name = "DIR")]
    pub dir: std::path::PathBuf,

    /// Print one JSON object instead of text.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The capture compared against (A).
    #[arg(value_name = "A")]
    pub a: std::path::PathBuf,

    /// The capture compared (B); leave out to compare two windows of A.
    #[arg(value_name = "B")]
    pub b: Option<std::path::PathBuf>,

    /// The window of A (and of B, unless --b-window), as queries write one
    /// (`last 60s`, `[FROM, TO]`); default the whole capture.
    #[arg(long, value_name = "WINDOW", help_heading = "Windows")]
    pub window: Option<String>,

    /// The window of B.
    #[arg(long, value_name = "WINDOW", help_heading = "Windows")]
    pub b_window: Option<String>,

    /// Fail (exit 1) when B's METRIC against A's crosses FACTOR for a
    /// syscall: `METRIC > FACTORx` or `METRIC < FACTORx`, METRIC one of
    /// count, rate, p50, p90, p99, p99.9, max (with `(dur)` or not).
    #[arg(long, value_name = "THRESHOLD", help_heading = "Exit status")]
    pub fail_if: Vec<String>,

    /// One JSON object per syscall instead of tables.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// What a row counts: a syscall (as `strace -c`), a process (its pid
    /// and name, as `syscount -P`), a thread (its tid and name) or a task
    /// name (every thread of that name).
    #[arg(long, value_enum, default_value_t, help_heading = "Output")]
    pub by: StatBy,
    /// A row per process: `--by pid`.
    #[arg(short = 'P', help_heading = "Output", conflicts_with = "by")]
    pub per_process: bool,
    /// Print what weft's own kernel programs cost per syscall, by the
    /// kernel's BPF run-time statistics.
    ///
    /// The statistics are machine-wide while weft runs and add two clock
    /// reads to every run of every BPF program, weft's included.
    #[arg(long, help_heading = "Output")]
    pub cost: bool,
    #[command(flatten)]
    pub capture: CaptureArgs,
}

/// `weft stat --by`: what a row counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum StatBy {
    #[default]
    Syscall,
    Pid,
    Tid,
    Comm,
}

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Filters (applied in the kernel)")]
pub struct FilterArgs {
    /// Trace only these processes (thread group ids).
    ///
    /// Repeat the flag or separate ids with commas. A pid that does not exist
    /// is an error. Threads of the process are included.
    #[arg(long, short = 'p', value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,

    /// Trace only tasks with this name (as in /proc/PID/comm, at most 15 bytes).
    #[arg(long, value_name = "COMM", value_parser = parse_comm)]
    pub comm: Option<String>,

    /// Run this command (split on blanks, as bpftrace's -c), trace it and
    /// every process it starts, and stop when it exits.
    ///
    /// As strace's and perf's: `-- PROGRAM ARGS...` at the end of the line
    /// runs a command with arguments as given. The command runs as root in
    /// a cgroup of its own (`weft-PID` under the cgroup2 root), which the
    /// probes filter on in the kernel, so its children are traced from
    /// their first call.
    #[arg(
        long,
        short = 'c',
        value_name = "COMMAND",
        conflicts_with_all = ["pid", "cgroup", "program"]
    )]
    pub command: Option<String>,

    /// The command to run and trace, after `--` (see -c).
    #[arg(last = true, value_name = "PROGRAM", conflicts_with_all = ["pid", "cgroup"])]
    pub program: Vec<String>,

    /// Trace only threads in this cgroup v2 directory (e.g.
    /// /sys/fs/cgroup/system.slice/redis.service), not in its children.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<std::path::PathBuf>,

    /// Trace only these syscalls, by x86-64 name (e.g. read,write).
    ///
    /// Repeat the flag or separate names with commas. With this flag weft
    /// attaches to the per-syscall tracepoints of just these syscalls (see
    /// --attach), so other syscalls do not run any weft code.
    #[arg(long, short = 's', value_name = "NAME", value_delimiter = ',')]
    pub syscall: Vec<String>,

    /// Drop syscalls that took less than this (e.g. 10us, 1ms).
    ///
    /// Applied in the kernel before a record is reserved, so short syscalls
    /// cost no ring-buffer space.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub min_duration: Option<Duration>,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Stop after this long (e.g. 5s, 2m); default: until Ctrl-C.
    #[arg(long, short = 'd', value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Print a table for each interval of this length (e.g. 1s).
    ///
    /// Each interval table covers only that interval; the final table covers
    /// the whole run.
    #[arg(long, short = 'i', value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,

    /// Print one JSON object per interval and one for the whole run.
    ///
    /// Objects are newline-delimited; the last has `"kind": "total"`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Capture")]
pub struct CaptureArgs {
    /// Ring buffer size per CPU (e.g. 16MiB); rounded up to a power of two.
    ///
    /// Each CPU has its own ring. A bigger ring absorbs longer bursts before
    /// records are lost; lost records are counted and shown. By default
    /// 256MiB are shared by the CPUs, 1MiB to 64MiB each (and as much again
    /// for the event sources' rings).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub ring_size: Option<u64>,

    /// How often rings are drained (e.g. 5ms).
    ///
    /// The kernel side submits records without waking user space, so this
    /// timer is what empties the rings.
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = parse_duration)]
    pub drain_interval: Duration,

    /// Where to attach: raw tracepoints on every syscall, or the per-syscall
    /// tracepoints of the --syscall list.
    ///
    /// `auto` picks `syscall` when --syscall is given and `raw` otherwise.
    #[arg(long, value_enum, default_value_t = Attach::Auto)]
    pub attach: Attach,
}

/// Attach points for the syscall probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Attach {
    /// `syscall` with --syscall, `raw` without.
    Auto,
    /// `raw_syscalls:sys_enter` / `sys_exit` raw tracepoints: every syscall.
    Raw,
    /// `syscalls:sys_enter_NAME` / `sys_exit_NAME`: only the named syscalls.
    Syscall,
}

/// Parses `5s`, `100ms`, `1.5s`, `250us`, `2m`, `1h`, `10ns`.
/// `-30s..+10s`: the time kept before and after.
pub fn parse_keep(text: &str) -> Result<(Duration, Duration), String> {
    let bad = || format!("`{text}` is not -BEFORE..+AFTER (e.g. -30s..+10s)");
    let (before, after) = text.split_once("..").ok_or_else(bad)?;
    let before = before.strip_prefix('-').ok_or_else(bad)?;
    let after = after.strip_prefix('+').unwrap_or(after);
    Ok((parse_duration(before)?, parse_duration(after)?))
}

/// `10/1h`: at most 10 per hour.
pub fn parse_rate(text: &str) -> Result<(usize, Duration), String> {
    let (count, period) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not N/PERIOD (e.g. 10/1h)"))?;
    let count = count
        .parse()
        .map_err(|_| format!("`{count}` in `{text}` is not a count"))?;
    Ok((count, parse_duration(period)?))
}

/// `START-END`, hex addresses (`0x` optional), START at most END.
fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let hex = |t: &str| {
        u64::from_str_radix(t.trim_start_matches("0x"), 16)
            .map_err(|_| format!("`{t}` is not a hex address"))
    };
    let (start, end) = text
        .split_once('-')
        .ok_or_else(|| format!("`{text}` is not START-END"))?;
    let (start, end) = (hex(start)?, hex(end)?);
    if start > end {
        return Err(format!("`{text}` ends before it starts"));
    }
    Ok((start, end))
}

/// A number as libipt's tools take one: hex with `0x`, else decimal.
fn parse_number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a number (decimal, or hex with 0x)"))
}

/// A PT window's length: a duration within what `weft pt record` allows.
fn parse_pt_window(text: &str) -> Result<Duration, String> {
    let windows = weft_pt_capture::window::DURATIONS;
    let duration = parse_duration(text)?;
    if !windows.contains(&duration) {
        return Err(format!(
            "a PT window lasts {:?} to {:?}",
            windows.start(),
            windows.end()
        ));
    }
    Ok(duration)
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("`{text}` has no unit (use ns, us, ms, s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a duration (a number and a unit: 30s, 10m, 250us)"
        ));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` in `{text}` is not a number"))?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}` (use ns, us, ms, s, m, h or d)"
            ));
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("`{text}` is out of range"))
}

/// Parses `4096`, `64KiB`, `16MiB`, `1GiB` into bytes.
/// A process id as bpftrace checks one: decimal, within the kernel's
/// largest `pid_max`.
pub fn parse_pid(text: &str) -> Result<u32, String> {
    const PID_MAX: u32 = 4_194_304;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("pid '{text}' is not a valid decimal number"));
    }
    text.parse::<u32>()
        .ok()
        .filter(|pid| (1..=PID_MAX).contains(pid))
        .ok_or_else(|| format!("pid '{text}' out of valid pid range [1,{PID_MAX}]"))
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number"))?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}` (use KiB, MiB or GiB)"
            ));
        }
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is out of range"))
}

fn parse_comm(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > 15 {
        return Err(format!(
            "`{text}` must be 1 to 15 bytes (the kernel's comm limit)"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn cli_debug_assert() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cli_every_flag_has_a_heading_and_kebab_name() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                if let Some(long) = arg.get_long() {
                    if ["help", "version"].contains(&long) {
                        continue;
                    }
                    assert!(arg.get_help_heading().is_some(), "--{long} has no heading");
                    assert!(!long.contains('_'), "--{long} is not kebab-case");
                }
            }
        }
    }

    #[test]
    fn parse_duration_units() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10ns"), Ok(Duration::from_nanos(10)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
    }

    #[test]
    fn parse_duration_rejects_bad_input() {
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5x").unwrap_err().contains("unknown unit"));
        assert!(
            parse_duration("abc")
                .unwrap_err()
                .contains("`abc` is not a duration")
        );
        assert!(
            parse_duration("1.2.3s")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse_duration("-1s").unwrap_err().contains("out of range"));
    }

    #[test]
    fn parse_keep_and_rate() {
        let s = Duration::from_secs;
        assert_eq!(parse_keep("-30s..+10s"), Ok((s(30), s(10))));
        assert_eq!(parse_keep("-1m..5s"), Ok((s(60), s(5))));
        assert!(
            parse_keep("30s..10s")
                .unwrap_err()
                .contains("-BEFORE..+AFTER")
        );
        assert_eq!(parse_rate("10/1h"), Ok((10, s(3600))));
        assert!(parse_rate("ten/1h").unwrap_err().contains("not a count"));
        assert!(parse_rate("10").unwrap_err().contains("N/PERIOD"));
    }

    #[test]
    fn parse_size_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert!(parse_size("16XB").is_err());
    }

    #[test]
    fn stat_flags_repeat_and_split() {
        let cli = Cli::try_parse_from([
            "weft",
            "stat",
            "--pid",
            "1,2",
            "-p",
            "3",
            "--syscall",
            "read",
            "-s",
            "write,close",
        ])
        .unwrap();
        let Some(Command::Stat(args)) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(args.filter.pid, vec![1, 2, 3]);
        assert_eq!(args.filter.syscall, vec!["read", "write", "close"]);
        assert_eq!(args.capture.attach, Attach::Auto);
    }

    #[test]
    fn stat_comm_too_long() {
        let err =
            Cli::try_parse_from(["weft", "stat", "--comm", "a-very-long-comm-name"]).unwrap_err();
        assert!(err.to_string().contains("1 to 15 bytes"));
    }
}
