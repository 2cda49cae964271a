//! The generic trace programs from user space: one configuration per attach
//! point in `ONELINER_PROBES`, the tracepoint program attached to each
//! tracepoint, the per-CPU rings drained into [`Event`]s.

use std::{
    ffi::CString,
    os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
    path::{Path, PathBuf},
    thread::JoinHandle,
    time::Duration,
};

use crate::error::{Context as _, Error, Result, bail};
use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{
        Array, MapData, StackTraceMap,
        perf::{PerfEvent as PerfRecord, PerfEventArray, PerfEventArrayBuffer},
    },
    programs::{
        Program,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope},
    },
};
use perf_event::{
    Builder,
    events::{Breakpoint, Hardware, KProbe, Software, Tracepoint},
};
use weft_abi::oneliner::{
    AGGS_MAP, COPIES, COUNTER_ROW, COUNTERS_MAP, CopyKind, Counter, HEADER_SIZE, Header,
    IGNORE_GLOBAL, ITERATORS, JOIN_SIZE, MAX_AGGS, MAX_ATTACHES, MAX_SAVED, MAX_STARTS,
    MAX_STRINGS, PATHS_GLOBAL, PROBES_MAP, ProbeConfig, RINGS_MAP, SAVED_MAP, SCRATCH,
    SKB_OUTPUT_MAP, SKBS_GLOBAL, STACKS_MAP, STARTS_MAP, STRING_LEN_GLOBAL, SkbMeta,
    THREAD_EXIT_PROGRAM, TID_STARTS_GLOBAL, TRACEPOINT_COPIES, TRACEPOINT_WIDTHS, USES_GLOBAL,
    copy_key,
};
use weft_abi::ring::{self, Ring};
use weft_oneliner::{
    Attach, Event, Plan, Target,
    ast::{PerfEvent, period_ns},
    lower,
    plan::{Hook, ReadKind},
};

use weft_symbols::FileOffsets;

use super::{
    aggs::Aggs,
    files::uprobe_file,
    module_fentry::{Attached, Programs, map_data},
    stacks::Stacks,
};
use crate::{
    counters::CounterArray,
    delivery::Delivery,
    ebpf,
    oneliner::kernel::event_id,
    rings::{Making, RingArray},
};

/// Packets kept at most for events still to come.
const MAX_PACKETS: usize = 4096;

/// A packet sample's event time, CPU and packet bytes.
fn packet_of(sample: &[u8]) -> Option<(u64, u32, &[u8])> {
    let meta_len = size_of::<SkbMeta>();
    let meta = sample.get(..meta_len)?;
    // SAFETY: `meta_len` bytes, a plain-integer repr(C) struct.
    let meta: SkbMeta = unsafe { std::ptr::read_unaligned(meta.as_ptr().cast()) };
    // The sample ends with the kernel's padding: the meta says how long
    // the packet is.
    let packet = sample.get(meta_len..meta_len + meta.len as usize)?;
    Some((meta.ns, meta.cpu, packet))
}

/// Distinct stacks kept for `kstack`/`ustack`.
const STACKS: u32 = 16384;

/// The tracepoint program every tracepoint attach point shares.
const TRACEPOINT_PROGRAM: &str = "weft_oneliner_tracepoint";
/// The program of kprobes, kretprobes, uprobes and uretprobes.
const KPROBE_PROGRAM: &str = "weft_oneliner_kprobe";
/// Why an fentry or fexit program does not load, most of the time.
const NO_TRAMPOLINES: &str = "this kernel cannot attach fentry/fexit programs (BPF trampolines \
     need ftrace with direct calls); use a tracepoint, or a kprobe where the kernel has them";

/// Objects an iterator goes over between drains: their records stay well
/// below a ring's room.
const ITERATOR_BATCH: usize = 32;

/// Why the kernel refuses an fentry or fexit program that calls
/// `bpf_d_path` (`path()`), where it can attach others.
const PATH_REFUSED: &str = "path() calls the kernel's bpf_d_path, which it allows only in \
     fentry and fexit programs of the functions on its list (security_file_open, \
     security_file_permission, security_inode_getattr, vfs_getattr, vfs_truncate, \
     vfs_fallocate, dentry_open, filp_close), on a struct path it can see is one; \
     or this kernel cannot attach fentry/fexit programs";

/// The programs of uprobes and uretprobes.
const UPROBE_PROGRAM: &str = "weft_oneliner_uprobe";
const URETPROBE_PROGRAM: &str = "weft_oneliner_uretprobe";
/// Raw tracepoint copies that also come in the form loading the context's
/// second word in place (`weft_oneliner_raw_tp_w16_N`, `ebpf/src/oneliner.rs`).
const RAW_IN_PLACE_COPIES: u32 = 2;
/// The program of `profile:` probes.
const PERF_PROGRAM: &str = "weft_oneliner_perf";

/// A tracepoint attachment; dropping it detaches.
struct Link {
    _event: perf_event::Counter,
    _link: OwnedFd,
}

/// The perf-event attachments, closed many at once (see
/// [`ebpf::close_at_once`]).
#[derive(Default)]
struct Links(Vec<Link>);

impl Links {
    fn close(&mut self) {
        ebpf::close_at_once(std::mem::take(&mut self.0));
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        self.close();
    }
}

/// What one [`OnelinerProbe::drain`] handed out.
#[derive(Clone, Copy, Debug, Default)]
pub struct Batch {
    /// Events handed.
    pub events: u64,
    /// The time of the earliest record left for later as newer than asked.
    pub held: Option<u64>,
}

/// What weft says, as bpftrace does, when a watchpoint finds no debug
/// register free.
pub const OUT_OF_REGISTERS: &str =
    "Failed to attach watchpoint probe. You are out of watchpoint registers.";

pub struct OnelinerProbe {
    /// Declared before `ebpf`: links go before the programs they run.
    links: Links,
    uprobes: Vec<UProbeLink>,
    /// Each watchpoint's links, by the address it watches: `unwatch()`
    /// closes them.
    watchpoints: Vec<(u64, Link)>,
    /// Watchpoints on a function's argument, set as its calls ask
    /// ([`Self::watch`]), by attach index: the length and mode each
    /// watches, and the address it was last set on.
    watch_args: std::collections::HashMap<usize, (u8, &'static str, Option<u64>)>,
    /// Copy programs in use (fentry, fexit, raw tracepoints), by name.
    copies: Vec<(CopyKind, String)>,
    /// The fentry or fexit copy each attach point takes, if any.
    function_copies: Vec<Option<usize>>,
    /// The raw tracepoint copies that run BEGIN and END in the kernel
    /// (`Attach::kernel_run`), loaded and never attached, by attach index.
    runs: Vec<(usize, String)>,
    /// Probes attached to each tracepoint, by event id.
    tracepoints: std::collections::HashMap<u32, usize>,
    /// Kernel BTF, read for the first fentry, fexit or iterator probe.
    btf: Option<Btf>,
    /// vmlinux's and the modules' BTF, read for the first fentry or fexit
    /// on a function vmlinux's BTF lacks.
    module_btf: Option<super::btf::Btf>,
    /// The programs relocated for fentry and fexit on modules' functions,
    /// and those attached.
    module_programs: Option<Programs>,
    module_attached: Vec<Attached>,
    /// Each CPU's buffer of the packets `skboutput()` copies, where a probe
    /// copies them.
    skb_buffers: Vec<PerfEventArrayBuffer<MapData>>,
    /// Packets read and not yet handed with their events, by the events'
    /// CPU and time.
    packets: std::collections::HashMap<(u32, u64), Vec<u8>>,
    /// Packets the kernel had no room for, or that no event took.
    packets_lost: u64,
    /// The packets' map, taken out of `ebpf` for its buffers: the copies
    /// weft loads itself are relocated against it too.
    skb_map: Option<OwnedFd>,
    /// The file of the program's iterator (`iter:`), whose reads run it.
    iterator: Option<std::fs::File>,
    ebpf: Ebpf,
    /// The parts of the programs' body loaded (`USES_*`).
    uses: u32,
    rings: Vec<Ring>,
    counters: CounterArray,
    stacks: Stacks,
    /// Attach points left out (uprobes on functions their file lacks).
    left_out: usize,
    /// Uprobe target files, read, by path.
    uprobe_files: std::collections::HashMap<PathBuf, FileOffsets>,
    /// The process watchpoints watch (none: every process).
    watched: Option<u32>,
    /// Bytes of each string slot in a record ([`STRING_LEN_GLOBAL`]).
    string_len: usize,
    received: u64,
    /// Records shorter than their header says; never expected.
    malformed: u64,
    /// Runs the kernel skipped, read as the probes were detached (the
    /// copies' counts go with them).
    skipped_at_detach: Option<u64>,
}

/// The slow parts of loading that need nothing from the program, started
/// before it is parsed so that they run meanwhile: the kernel clears every
/// ring page at creation and waits for RCU grace periods as the ring array
/// is filled, and making a loader takes a thread.
pub struct Preload {
    rings: Making,
    loader: JoinHandle<EbpfLoader<'static>>,
}

impl Preload {
    pub fn start(ring_bytes: u32) -> Result<Self> {
        let cpus = ebpf::cpus()?;
        Ok(Self {
            rings: RingArray::spawn(cpus, ring_bytes),
            loader: ebpf::spawn_loader_without_btf(),
        })
    }
}

impl OnelinerProbe {
    /// Loads the programs and readies BEGIN and END where the kernel runs
    /// them ([`Self::run_in_kernel`]); [`Self::attach`] attaches the rest.
    /// `cpid` is the `-c` command's pid, for predicates that compare with it.
    /// `finder` names user functions for `ustack` and finds uprobes'.
    pub fn load(
        plan: &Plan,
        preload: Preload,
        cpid: u32,
        finder: weft_symbols::Finder,
    ) -> Result<Self> {
        let cpus = ebpf::cpus()?;
        let own = std::process::id();
        let mut loader = preload
            .loader
            .join()
            .expect("the loader thread does not panic");
        let rings = preload.rings.wait()?;
        rings.use_in(&mut loader, RINGS_MAP);
        let uses = lower::uses(plan, cpid)?;
        let thread_starts = lower::tid_starts(plan);
        let paths = lower::paths(plan)?;
        let mut ebpf = loader
            .override_global(IGNORE_GLOBAL, &own, true)
            .override_global(TID_STARTS_GLOBAL, &thread_starts, true)
            .override_global(USES_GLOBAL, &uses, true)
            .override_global(STRING_LEN_GLOBAL, &(plan.string_len as u32), true)
            .override_global(PATHS_GLOBAL, &paths, true)
            .override_global(SKBS_GLOBAL, &lower::skbs(plan), true)
            .map_max_entries(RINGS_MAP, cpus)
            .map_max_entries(COUNTERS_MAP, cpus * COUNTER_ROW)
            // The kernel allocates every stack slot up front: size the map
            // only when a probe records stacks.
            .map_max_entries(
                STACKS_MAP,
                if plan.attaches.iter().any(|a| a.kstack || a.ustack) {
                    STACKS
                } else {
                    1
                },
            )
            // Likewise the aggregation map, when no probe aggregates in
            // the kernel, and the start times', when it keeps none.
            .map_max_entries(
                AGGS_MAP,
                if plan.attaches.iter().any(|a| a.agg.is_some()) {
                    MAX_AGGS
                } else {
                    1
                },
            )
            .map_max_entries(
                STARTS_MAP,
                if plan.attaches.iter().any(|a| a.start.is_some()) {
                    MAX_STARTS
                } else {
                    1
                },
            )
            // And the kept pointers', an LRU the kernel fills up front.
            .map_max_entries(
                SAVED_MAP,
                if plan.attaches.iter().any(|a| !a.saves.is_empty()) {
                    MAX_SAVED
                } else {
                    1
                },
            )
            .load(ebpf::oneliner_object()?)
            .context("failed to load the trace programs")?;
        // The kernel verifies each program as it loads (milliseconds),
        // while the ring array is still being filled.
        for attach in plan.attaches.iter().filter(|a| a.in_kernel()) {
            if let Some(name) = shared_program(attach) {
                program(&mut ebpf, &name)?;
            }
        }
        let rings = rings.finish(&ebpf, RINGS_MAP)?;
        let counters = CounterArray::map(&ebpf, COUNTERS_MAP, cpus, COUNTER_ROW)?;
        // A watchpoint watches the `-c` command, else the `-p` process,
        // else every process.
        let watched = Some(cpid).filter(|&pid| pid != 0).or(plan.program.pid);
        let mut probe = Self {
            watched,
            links: Links::default(),
            uprobes: Vec::new(),
            copies: Vec::new(),
            function_copies: lower::function_copies(plan),
            runs: Vec::new(),
            tracepoints: std::collections::HashMap::new(),
            btf: None,
            module_btf: None,
            module_programs: None,
            module_attached: Vec::new(),
            skb_buffers: Vec::new(),
            packets: std::collections::HashMap::new(),
            packets_lost: 0,
            skb_map: None,
            iterator: None,
            ebpf,
            uses,
            rings,
            counters,
            stacks: Stacks::new(finder),
            left_out: 0,
            uprobe_files: std::collections::HashMap::new(),
            string_len: plan.string_len,
            received: 0,
            malformed: 0,
            skipped_at_detach: None,
            watchpoints: Vec::new(),
            watch_args: std::collections::HashMap::new(),
        };
        for (index, attach) in plan.attaches.iter().enumerate() {
            if attach.kernel_run && matches!(attach.target, Target::Begin | Target::End) {
                probe.ready_run(index, attach, cpid)?;
            }
        }
        probe.open_skb_buffers(plan, cpus)?;
        Ok(probe)
    }

    /// Configures and attaches every attach point of `plan` the kernel
    /// fires (BEGIN and END it runs when told).
    pub fn attach(&mut self, plan: &Plan, tracefs: &Path, cpid: u32) -> Result<()> {
        let mut points = vec![0; plan.attaches.iter().map(|a| a.item + 1).max().unwrap_or(0)];
        for attach in &plan.attaches {
            points[attach.item] += 1;
        }
        // The kernel runs the probes of one function (of one software
        // event) newest first: attached last to first, they run in the
        // order written, as bpftrace attaches them (its `attach_reverse`).
        let (reversed, others): (Vec<_>, Vec<_>) = (plan.attaches.iter().enumerate())
            .filter(|(_, attach)| {
                attach.in_kernel() && !matches!(attach.target, Target::Begin | Target::End)
            })
            .partition(|(_, attach)| match &attach.target {
                // (USDT sites are one probe each, fired apart: in the order
                // listed, the first site is the first traced.)
                Target::Uprobe { .. } | Target::Kprobe { .. } | Target::Fentry { .. } => true,
                Target::PerfEvent { event, .. } => !event.hardware(),
                _ => false,
            });
        for (index, attach) in others.into_iter().chain(reversed.into_iter().rev()) {
            match self.attach_point(tracefs, index, attach, cpid) {
                Ok(()) => {}
                // As bpftrace does: of a probe with several attach points,
                // a function the kernel lacks (a module not loaded) or a
                // file lacks (a static function without debug info) is
                // left out, the rest attach.
                Err(error)
                    if matches!(error.innermost(), Error::NoFunction { .. })
                        && points[attach.item] > 1 =>
                {
                    log::warn!("weft: {error:#}; left out, the probe's other attach points stay");
                    self.left_out += 1;
                }
                Err(error) => return Err(error),
            }
        }
        if lower::tid_starts(plan) != 0 {
            self.attach_thread_exit(tracefs)?;
        }
        Ok(())
    }

    /// Loads a raw tracepoint copy for BEGIN or END attach point `index`,
    /// configured and never attached: [`Self::run_in_kernel`] runs it.
    fn ready_run(&mut self, index: usize, attach: &Attach, cpid: u32) -> Result<()> {
        let key = self.next_copy(CopyKind::RawTracepoint, index, attach)?;
        self.configure(key, index, attach, cpid)?;
        let name = format!(
            "weft_oneliner_raw_tp_{}",
            key - copy_key(CopyKind::RawTracepoint, 0)
        );
        program(&mut self.ebpf, &name)?;
        self.runs.push((index, name));
        Ok(())
    }

    /// Runs BEGIN or END attach point `index`, readied by [`Self::load`],
    /// once in this thread (`BPF_PROG_TEST_RUN`, as bpftrace runs them):
    /// its event lands in the rings as any probe's.
    pub fn run_in_kernel(&mut self, index: usize) -> Result<()> {
        let (_, name) = (self.runs.iter())
            .find(|(i, _)| *i == index)
            .with_context(|| format!("attach point {index} is not run in the kernel"))?;
        let name = name.clone();
        let fd = program(&mut self.ebpf, &name)?;
        test_run(fd).with_context(|| format!("the kernel did not run {name}"))
    }
    /// The key of the copy of `kind` for attach point `index`: the one the
    /// plan gave an fentry or fexit ([`lower::function_copies`], which the
    /// loaded paths follow), else the next free one.
    fn next_copy(&self, kind: CopyKind, index: usize, attach: &Attach) -> Result<u32> {
        let used = match self.function_copies.get(index) {
            Some(Some(copy)) => *copy,
            _ => {
                self.copies.iter().filter(|(k, _)| *k == kind).count()
                    + if kind == CopyKind::RawTracepoint {
                        self.runs.len()
                    } else {
                        0
                    }
            }
        };
        if used >= COPIES as usize {
            bail!(
                "{}: weft attaches at most {COPIES} probes of this type per program",
                attach.target.name()
            );
        }
        Ok(copy_key(kind, used as u32))
    }

    /// Writes attach point `index`'s configuration at `key`.
    fn configure(&mut self, key: u32, index: usize, attach: &Attach, cpid: u32) -> Result<()> {
        let mut probes: Array<&mut MapData, ProbeConfig> = Array::try_from(
            self.ebpf
                .map_mut(PROBES_MAP)
                .context("the trace object has no probe map")?,
        )?;
        let config = lower::config(index, attach, cpid)?;
        if config.uses() & !self.uses != 0 {
            return Err(Error::Missing(format!(
                "{}: needs parts of the trace program that were not loaded ({:#x} of {:#x})",
                attach.target.name(),
                config.uses(),
                self.uses
            )));
        }
        probes
            .set(key, config, 0)
            .context("failed to configure a probe")
    }

    /// Attaches the program that removes a thread's taken starts when it
    /// exits ([`THREAD_EXIT_PROGRAM`]).
    fn attach_thread_exit(&mut self, tracefs: &Path) -> Result<()> {
        let id = event_id(tracefs, "sched", "sched_process_exit")?;
        let fd = program(&mut self.ebpf, THREAD_EXIT_PROGRAM)?;
        let event = Tracepoint::with_id(id.into());
        self.link(fd, Builder::new(event).one_cpu(0), 0)
            .context("failed to attach to sched:sched_process_exit, which forgets exited threads' start times")
    }

    fn attach_point(
        &mut self,
        tracefs: &Path,
        index: usize,
        attach: &Attach,
        cpid: u32,
    ) -> Result<()> {
        // Programs that attach without a cookie come in copies, each with
        // its own key; the rest are keyed by their attach index.
        if let Target::Iter { name } = &attach.target {
            return self.attach_iterator(index, attach, name, cpid);
        }
        let copy = match &attach.target {
            Target::Fentry { exit: false, .. } => Some(CopyKind::Fentry),
            Target::Fentry { exit: true, .. } => Some(CopyKind::Fexit),
            Target::RawTracepoint { .. } => Some(CopyKind::RawTracepoint),
            Target::Tracepoint { .. } if attach.hook == Hook::Raw => Some(CopyKind::RawTracepoint),
            _ => None,
        };
        let key = match copy {
            Some(kind) => self.next_copy(kind, index, attach)?,
            None => u32::try_from(index)
                .ok()
                .filter(|&index| index < MAX_ATTACHES)
                .with_context(|| {
                    format!("weft attaches at most {MAX_ATTACHES} points per program")
                })?,
        };
        self.configure(key, index, attach, cpid)?;
        let cookie = u64::from(key);
        let name = attach.target.name();
        match &attach.target {
            Target::Tracepoint { name, .. } if attach.hook == Hook::Raw => {
                // Both raw_syscalls hooks have two arguments: the copy that
                // loads the second in place attaches there, where it has one.
                let kind = copy.expect("set above");
                let i = key - copy_key(kind, 0);
                let program = if i < RAW_IN_PLACE_COPIES {
                    format!("weft_oneliner_raw_tp_w16_{i}")
                } else {
                    format!("weft_oneliner_raw_tp_{i}")
                };
                self.attach_copy_named(kind, program, name, NO_TRAMPOLINES)
            }
            Target::Tracepoint { category, name } => {
                let id = event_id(tracefs, category, name)?;
                let event = Tracepoint::with_id(id.into());
                let copy = self.tracepoint_program(id, tracepoint_width(attach))?;
                let fd = program(&mut self.ebpf, &copy)?;
                self.link(fd, Builder::new(event).one_cpu(0), cookie)
            }
            Target::Kprobe { function, exit } => {
                let symbol = CString::new(function.as_str())
                    .map_err(|_| Error::Invalid(format!("{name}: a NUL byte in the name")))?;
                let event = KProbe::for_function(*exit, symbol, 0)
                    .with_context(|| format!("{name}: the kprobe PMU is missing"))?;
                let fd = program(&mut self.ebpf, KPROBE_PROGRAM)?;
                self.link(fd, Builder::new(event).one_cpu(0), cookie)
                    .map_err(|error| {
                        // The kprobe PMU's answers for a function the kernel
                        // lacks (ENOENT) or cannot probe (EINVAL: inlined,
                        // or on the kprobe blacklist).
                        let missing = error.raw_os_error();
                        if matches!(missing, Some(libc::ENOENT | libc::EINVAL)) {
                            Error::NoFunction {
                                place: "the kernel".into(),
                                function: function.clone(),
                            }
                        } else {
                            error
                        }
                    })
            }
            Target::Uprobe { path, symbol, exit } => {
                self.attach_uprobe(path, symbol, *exit, cookie)
            }
            Target::Usdt {
                path,
                offset,
                semaphore,
                ..
            } => {
                let event = super::usdt::Usdt::new(path, *offset, *semaphore)?;
                let fd = program(&mut self.ebpf, UPROBE_PROGRAM)?;
                self.link(fd, Builder::new(event).one_cpu(0), cookie)
            }
            Target::Profile { .. } | Target::PerfEvent { .. } => {
                self.attach_perf(&attach.target, cookie)
            }
            Target::Watchpoint { address, len, mode } => {
                if self.attach_watchpoint(*address, *len, mode, cookie)? {
                    Ok(())
                } else {
                    Err(Error::Invalid(OUT_OF_REGISTERS.into()))
                }
            }
            // Set as the function's calls ask (`watch`).
            Target::WatchArg { len, mode, .. } => {
                self.watch_args.insert(index, (*len, mode, None));
                Ok(())
            }
            Target::Fentry { function, .. } | Target::RawTracepoint { name: function } => {
                let kind = copy.expect("set above");
                let refused = if attach.reads.iter().any(|r| r.kind == ReadKind::Path) {
                    PATH_REFUSED
                } else {
                    NO_TRAMPOLINES
                };
                self.attach_copy(kind, key - copy_key(kind, 0), function, refused)
            }
            Target::Interval { .. } => self.attach_perf(&attach.target, cookie),
            _ => bail!("{name}: runs in weft, not in the kernel"),
        }
        .with_context(|| format!("failed to attach {name}"))
    }

    /// Attaches the perf program to a `profile` or `software`/`hardware`
    /// target: one event on each CPU, all with `cookie`; to an interval
    /// that reads the kernel, one on CPU 0's clock, as bpftrace's.
    fn attach_perf(&mut self, target: &Target, cookie: u64) -> Result<()> {
        let fd = program(&mut self.ebpf, PERF_PROGRAM)?;
        let cpus = match target {
            Target::Interval { .. } => 1,
            _ => ebpf::cpus()? as usize,
        };
        for cpu in 0..cpus {
            let counter = match target {
                Target::Interval { unit, n } => {
                    let mut builder = Builder::new(Software::CPU_CLOCK);
                    builder.one_cpu(cpu).sample_period(period_ns(unit, *n));
                    open_perf_event(&mut builder)?
                }
                Target::Profile { unit, n } => {
                    let mut builder = Builder::new(Software::CPU_CLOCK);
                    builder.one_cpu(cpu);
                    // The CPU clock counts nanoseconds: a period is so many.
                    if *unit == "hz" {
                        builder.sample_frequency(*n);
                    } else {
                        builder.sample_period(period_ns(unit, *n));
                    }
                    open_perf_event(&mut builder)?
                }
                Target::PerfEvent { event, period, .. } => {
                    let mut builder = perf_builder(*event);
                    builder.one_cpu(cpu).sample_period(*period);
                    open_perf_event(&mut builder).with_context(|| {
                        if event.hardware() {
                            format!(
                                "this machine counts no {} (a VM often has no hardware counters)",
                                event.name()
                            )
                        } else {
                            format!("the kernel counts no {}", event.name())
                        }
                    })?
                }
                _ => bail!("{}: not a perf event", target.name()),
            };
            self.link_event(fd, counter, cookie)?;
        }
        Ok(())
    }

    /// Attaches the perf program to a hardware breakpoint on `len` bytes
    /// at `address`: in the watched process on any CPU, or in every
    /// process on each CPU. False where the CPU has no debug register left.
    fn attach_watchpoint(
        &mut self,
        address: u64,
        len: u8,
        mode: &str,
        cookie: u64,
    ) -> Result<bool> {
        let fd = program(&mut self.ebpf, PERF_PROGRAM)?;
        let len = u64::from(len);
        let breakpoint = match mode {
            "w" => Breakpoint::write(address, len),
            "rw" => Breakpoint::read_write(address, len),
            _ => Breakpoint::execute(address),
        };
        let mut builders = Vec::new();
        match self.watched {
            Some(pid) => {
                let mut builder = Builder::new(breakpoint);
                builder.observe_pid(pid.cast_signed()).any_cpu();
                builders.push(builder);
            }
            None => {
                for cpu in 0..ebpf::cpus()? as usize {
                    let mut builder = Builder::new(breakpoint);
                    builder.any_pid().one_cpu(cpu);
                    builders.push(builder);
                }
            }
        }
        for mut builder in builders {
            // Every hit: a watchpoint samples each access.
            builder.sample_period(1).exclude_kernel(false);
            let counter = match builder.build() {
                Err(error) if error.raw_os_error() == Some(libc::ENOSPC) => return Ok(false),
                built => built.with_context(|| {
                    format!(
                        "the CPU refused a breakpoint of {len} bytes at {address:#x} for `{mode}` \
                         (x86-64 watches 1, 2, 4 or 8 aligned bytes, and code with x)"
                    )
                })?,
            };
            self.watchpoints
                .push((address, enabled_link(fd, counter, cookie)?));
        }
        Ok(true)
    }

    /// Sets watchpoint attach point `index` (`watchpoint:FUNCTION+argN`)
    /// on `address`, as bpftrace does: on a new address it adds one, on the
    /// address it last set none. False where the CPU has no debug register
    /// left (x86-64 has four).
    pub fn watch(&mut self, index: usize, address: u64) -> Result<bool> {
        let Some((len, mode, last)) = self.watch_args.get_mut(&index) else {
            bail!("attach point {index} is no watchpoint on a function's argument");
        };
        if *last == Some(address) {
            return Ok(true);
        }
        *last = Some(address);
        let (len, mode) = (*len, *mode);
        self.attach_watchpoint(address, len, mode, index as u64)
    }

    /// Removes every watchpoint on `address` (`unwatch()`; none there is
    /// no error, as in bpftrace), when the event that asked reaches user
    /// space, as bpftrace does: hits until then still fire.
    pub fn unwatch(&mut self, address: u64) {
        self.watchpoints.retain(|(watched, _)| *watched != address);
    }

    /// Loads copy `i` of `kind` for `target` (a function or a raw
    /// tracepoint) and attaches it.
    /// `refused` explains a load the kernel refuses.
    fn attach_copy(
        &mut self,
        kind: CopyKind,
        i: u32,
        target: &str,
        refused: &'static str,
    ) -> Result<()> {
        let family = match kind {
            CopyKind::Fentry => "fentry",
            CopyKind::Fexit => "fexit",
            CopyKind::RawTracepoint => "raw_tp",
            CopyKind::Iter => bail!("iterators are not copies"),
        };
        self.attach_copy_named(kind, format!("weft_oneliner_{family}_{i}"), target, refused)
    }

    /// Loads copy program `name` of `kind` for `target` and attaches it.
    fn attach_copy_named(
        &mut self,
        kind: CopyKind,
        name: String,
        target: &str,
        refused: &'static str,
    ) -> Result<()> {
        if kind != CopyKind::RawTracepoint && self.btf.is_none() {
            self.btf = Some(Btf::from_sys_fs().context("fentry and fexit need kernel BTF")?);
        }
        let vmlinux = self.btf.as_ref().is_some_and(|btf| {
            btf.id_by_type_name_kind(target, aya_obj::btf::BtfKind::Func)
                .is_ok()
        });
        if kind != CopyKind::RawTracepoint && !vmlinux {
            self.attach_module_copy(kind, &name, target)
                .context(refused)?;
            self.copies.push((kind, name));
            return Ok(());
        }
        let program = self
            .ebpf
            .program_mut(&name)
            .with_context(|| format!("the trace program {name} is missing"))?;
        match program {
            Program::FEntry(p) => {
                p.load(target, self.btf.as_ref().expect("read above"))
                    .context(refused)?;
                p.attach()?;
            }
            Program::FExit(p) => {
                p.load(target, self.btf.as_ref().expect("read above"))
                    .context(refused)?;
                p.attach()?;
            }
            Program::RawTracePoint(p) => {
                p.load()?;
                p.attach(target)?;
            }
            _ => bail!("{name} is not a copy program"),
        }
        self.copies.push((kind, name));
        Ok(())
    }

    /// Opens each CPU's buffer of the packets `skboutput()` copies, where
    /// a probe of `plan` copies them.
    fn open_skb_buffers(&mut self, plan: &Plan, cpus: u32) -> Result<()> {
        if plan.attaches.iter().all(|a| a.skb.is_none()) {
            return Ok(());
        }
        let map = (self.ebpf.take_map(SKB_OUTPUT_MAP)).context("the packets' map is missing")?;
        let data = map_data(&map).context("the packets' map is no map aya knows")?;
        let fd = data.fd().as_fd().try_clone_to_owned();
        self.skb_map = Some(fd.context("failed to keep the packets' map")?);
        let mut array = PerfEventArray::<MapData>::try_from(map)?;
        for cpu in 0..cpus {
            let buffer = (array.open(cpu, Some(plan.packet_pages)))
                .map_err(std::io::Error::other)
                .context("failed to open a CPU's packet buffer")?;
            self.skb_buffers.push(buffer);
        }
        Ok(())
    }

    /// Reads the packets the kernel copied since the last call, keeping at
    /// most [`MAX_PACKETS`] for their events (the oldest are dropped, as
    /// are those more than a second older than `until`, whose events came
    /// or were lost).
    fn read_packets(&mut self, until: u64) {
        let Self {
            skb_buffers,
            packets,
            packets_lost,
            ..
        } = self;
        for buffer in skb_buffers {
            buffer.for_each(|event| match event {
                PerfRecord::Sample { head, tail } => {
                    let bytes = [head, tail].concat();
                    if let Some((ns, cpu, packet)) = packet_of(&bytes) {
                        packets.insert((cpu, ns), packet.to_vec());
                    }
                }
                PerfRecord::Lost { count } => *packets_lost += count,
            });
        }
        let before = packets.len();
        packets.retain(|(_, ns), _| ns.saturating_add(1_000_000_000) >= until);
        if packets.len() > MAX_PACKETS {
            let mut times: Vec<u64> = packets.keys().map(|(_, ns)| *ns).collect();
            times.sort_unstable();
            let keep_from = times[packets.len() - MAX_PACKETS];
            packets.retain(|(_, ns), _| *ns >= keep_from);
        }
        *packets_lost += (before - packets.len()) as u64;
    }

    /// Packets the kernel had no room for, or that no event took.
    pub fn packets_lost(&self) -> u64 {
        self.packets_lost
    }

    /// Loads copy program `name` of `kind` for `function`, a module's,
    /// and attaches it (aya cannot: see [`super::module_fentry`]).
    fn attach_module_copy(&mut self, kind: CopyKind, name: &str, function: &str) -> Result<()> {
        if self.module_btf.is_none() {
            self.module_btf = Some(super::btf::Btf::read().map_err(Error::Missing)?);
        }
        let btf = self.module_btf.as_ref().expect("read above");
        let (module, id) = btf
            .module_function(function)
            .with_context(|| format!("the kernel's BTF has no function `{function}`"))?;
        if self.module_programs.is_none() {
            let taken: Vec<_> = (self.skb_map.iter())
                .map(|fd| (SKB_OUTPUT_MAP, fd.as_raw_fd()))
                .collect();
            let object = ebpf::oneliner_object()?;
            self.module_programs = Some(Programs::relocate(&self.ebpf, object, &taken)?);
        }
        let programs = self.module_programs.as_ref().expect("made above");
        let attached = programs.attach(name, kind == CopyKind::Fexit, module, id)?;
        self.module_attached.push(attached);
        Ok(())
    }

    /// Loads and attaches iterator `name`'s program, configured at its
    /// copy's key; [`Self::iterate`] runs it.
    fn attach_iterator(
        &mut self,
        index: usize,
        attach: &Attach,
        name: &str,
        cpid: u32,
    ) -> Result<()> {
        let i = ITERATORS
            .iter()
            .position(|n| *n == name)
            .with_context(|| format!("no iterator `{name}`"))?;
        self.configure(copy_key(CopyKind::Iter, i as u32), index, attach, cpid)?;
        if self.btf.is_none() {
            self.btf = Some(Btf::from_sys_fs().context("iterators need kernel BTF")?);
        }
        let program = format!("weft_oneliner_iter_{name}");
        let Some(Program::Iter(iter)) = self.ebpf.program_mut(&program) else {
            bail!("the trace program {program} is missing");
        };
        iter.load(name, self.btf.as_ref().expect("read above"))
            .with_context(|| {
                format!("this kernel has no `{name}` iterator for BPF (Linux 5.8+)")
            })?;
        let id = iter.attach()?;
        let file = (iter.take_link(id)?.into_file())
            .map_err(std::io::Error::other)
            .context("failed to open the iterator")?;
        self.iterator = Some(file);
        Ok(())
    }

    /// Runs the iterator over up to [`ITERATOR_BATCH`] more of its objects
    /// (each program run writes one byte to its file, so a read of N bytes
    /// returns after N): false once it has been over them all, or where
    /// the program has none.
    pub fn iterate(&mut self) -> Result<bool> {
        use std::io::Read as _;
        let Some(file) = self.iterator.as_mut() else {
            return Ok(false);
        };
        let mut bytes = [0; ITERATOR_BATCH];
        let read = file
            .read(&mut bytes)
            .context("failed to run the iterator")?;
        Ok(read > 0)
    }

    /// Attaches at the function's offset in the file, found where weft
    /// finds every function's name (its symbol tables, its debug file, its
    /// dynamic symbols; mangled or demangled).
    fn attach_uprobe(&mut self, path: &str, symbol: &str, exit: bool, cookie: u64) -> Result<()> {
        let named = uprobe_file(path)?;
        let (file, offset) = self.find_function(&named, symbol)?;
        if file != named {
            log::warn!(
                "weft: {} has no function {symbol}; probing the one of {}, which it needs \
                 (glibc 2.34 moved libpthread's functions into libc)",
                named.display(),
                file.display()
            );
        }
        let name = if exit {
            URETPROBE_PROGRAM
        } else {
            UPROBE_PROGRAM
        };
        program(&mut self.ebpf, name)?;
        let Some(Program::UProbe(program)) = self.ebpf.program_mut(name) else {
            bail!("the trace program {name} is missing");
        };
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(offset),
            cookie: Some(cookie),
        };
        let id = program.attach(point, &file, UProbeScope::AllProcesses)?;
        self.uprobes.push(program.take_link(id)?);
        Ok(())
    }

    /// The file and offset of `symbol` for a uprobe on `file`: in the file,
    /// or, for a shared library that lacks it, in a library it needs
    /// (`DT_NEEDED`, next to it), where the dynamic linker finds it.
    fn find_function(&mut self, file: &Path, symbol: &str) -> Result<(PathBuf, u64)> {
        let offsets = self.offsets(file)?;
        if let Some(why) = offsets.refused(symbol) {
            bail!("{}: {why}", file.display());
        }
        if let Some(offset) = offsets.place(symbol) {
            return Ok((file.to_path_buf(), offset));
        }
        let library = file.to_string_lossy().contains(".so");
        let needed = if library {
            offsets.needed.clone()
        } else {
            Vec::new()
        };
        for name in needed {
            let Some(path) = file.parent().map(|dir| dir.join(&name)) else {
                continue;
            };
            if let Ok(offsets) = self.offsets(&path)
                && let Some(offset) = offsets.place(symbol)
            {
                return Ok((path, offset));
            }
        }
        Err(Error::NoFunction {
            place: file.display().to_string(),
            function: symbol.to_owned(),
        })
    }

    /// The functions of `file`, read once however many are probed.
    fn offsets(&mut self, file: &Path) -> Result<&FileOffsets> {
        Ok(match self.uprobe_files.entry(file.to_path_buf()) {
            std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
            std::collections::hash_map::Entry::Vacant(new) => {
                new.insert(self.stacks.file_offsets(file)?)
            }
        })
    }

    /// Opens the perf event of `builder` for any process (on the CPU the
    /// caller chose: CPU 0 for probes, which fire on every CPU) and links
    /// program `fd` to it with `cookie`.
    fn link(&mut self, fd: RawFd, builder: &mut Builder<'_>, cookie: u64) -> Result<()> {
        let event = open_perf_event(builder)?;
        self.link_event(fd, event, cookie)
    }

    fn link_event(&mut self, fd: RawFd, event: perf_event::Counter, cookie: u64) -> Result<()> {
        self.links.0.push(enabled_link(fd, event, cookie)?);
        Ok(())
    }

    /// Function names for `usym()` and `ksym()`, shared with the stacks'.
    /// The copy of the tracepoint program of `width` for the next probe on
    /// tracepoint `id`: the kernel runs one program at most once per
    /// tracepoint.
    fn tracepoint_program(&mut self, id: u32, width: u32) -> Result<String> {
        let used = self.tracepoints.entry(id).or_insert(0);
        let copy = *used;
        *used += 1;
        if copy >= TRACEPOINT_COPIES {
            bail!("weft attaches at most {TRACEPOINT_COPIES} probes to one tracepoint");
        }
        Ok(tracepoint_copy(width, copy))
    }

    /// The aggregations the kernel keeps, for the runtime to read when it
    /// prints their maps; call once.
    pub fn aggs(&mut self) -> Result<Aggs> {
        Aggs::take(&mut self.ebpf)
    }

    pub fn names(&self) -> super::stacks::Names {
        self.stacks.names()
    }

    /// How many attach points of the plan were left out.
    pub fn left_out(&self) -> usize {
        self.left_out
    }

    /// Waits up to `timeout` for a record in any ring. The kernel wakes a
    /// waiter when a record lands in an empty ring.
    pub fn wait(&self, timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .filter_map(Ring::fd)
            .chain(self.skb_buffers.iter().map(|b| b.as_fd()))
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds. An error
        // (EINTR at Ctrl-C) only ends the wait early.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Detaches every probe; what is in the rings can still be drained.
    pub fn detach(&mut self) {
        self.links.close();
        self.watchpoints.clear();
        // Read before the copies are unloaded, and none can run now.
        self.skipped_at_detach = Some(self.skipped());
        self.uprobes.clear();
        self.module_attached.clear();
        for (_, name) in std::mem::take(&mut self.copies) {
            // Unloading detaches; the maps and rings stay for the last drain.
            let _ = match self.ebpf.program_mut(&name) {
                Some(Program::FEntry(p)) => p.unload(),
                Some(Program::FExit(p)) => p.unload(),
                Some(Program::RawTracePoint(p)) => p.unload(),
                _ => Ok(()),
            };
        }
    }

    /// Hands the waiting records up to time `until` to `on_event`, in time
    /// order across the CPUs' rings (see [`ring::drain_merged`]: newer ones
    /// wait, so that one committed late on another CPU still comes in its
    /// place); stops early (leaving the rest in the rings) when it returns
    /// false.
    pub fn drain(&mut self, until: u64, mut on_event: impl FnMut(&Event<'_>) -> bool) -> Batch {
        let before = self.received;
        if !self.skb_buffers.is_empty() {
            self.read_packets(until);
        }
        let Self {
            ebpf,
            rings,
            stacks,
            received,
            malformed,
            string_len,
            packets,
            ..
        } = self;
        let stack_map = ebpf
            .map(STACKS_MAP)
            .and_then(|map| StackTraceMap::try_from(map).ok());
        // In time order across the CPUs' rings: a process that moved
        // between CPUs is seen in the order it ran.
        let drained = ring::drain_merged(rings, record_ns, until, |item| {
            let Some(header) = item.get(..HEADER_SIZE) else {
                *malformed += 1;
                return true;
            };
            // SAFETY: HEADER_SIZE bytes, a plain-integer repr(C) struct.
            let header: Header = unsafe { std::ptr::read_unaligned(header.as_ptr().cast()) };
            // Only a record with a join block is longer than SCRATCH.
            let body_end = if item.len() > SCRATCH {
                item.len()
                    .checked_sub(JOIN_SIZE)
                    .filter(|end| *end >= HEADER_SIZE)
            } else {
                Some(item.len())
            };
            let Some(body_end) = body_end else {
                *malformed += 1;
                return true;
            };
            let (rest, join) = (&item[HEADER_SIZE..body_end], &item[body_end..]);
            let raw_len = usize::from(header.raw_len);
            let Some(string_bytes) = rest.len().checked_sub(raw_len) else {
                *malformed += 1;
                return true;
            };
            // On the stack: a Vec here was an allocation per event.
            let mut slots: [&[u8]; MAX_STRINGS] = [&[]; MAX_STRINGS];
            let mut chunks = rest[..string_bytes].chunks(*string_len);
            let count = slots
                .iter_mut()
                .zip(&mut chunks)
                .map(|(s, c)| *s = c)
                .count();
            if chunks.next().is_some() {
                *malformed += 1;
                return true;
            }
            // Most probes record no stack: no lookup then.
            let (kstack, ustack) = match &stack_map {
                Some(map) if header.kstack >= 0 || header.ustack >= 0 => (
                    stacks.kernel(map, header.kstack),
                    stacks.user(map, (header.pid_tgid >> 32) as u32, header.ustack),
                ),
                _ => (None, None),
            };
            // Most programs copy no packet: no lookup then.
            let packet = if packets.is_empty() {
                Vec::new()
            } else {
                packets.remove(&(header.cpu, header.ns)).unwrap_or_default()
            };
            let event = Event {
                attach: usize::from(header.attach),
                ns: header.ns,
                pid: (header.pid_tgid >> 32) as u32,
                tid: header.pid_tgid as u32,
                uid: header.uid_gid as u32,
                gid: (header.uid_gid >> 32) as u32,
                cpu: header.cpu,
                comm: &header.comm,
                raw: &rest[string_bytes..],
                strings: &slots[..count],
                join,
                kstack: kstack.as_deref(),
                ustack: ustack.as_deref(),
                start: header.start,
                packet: &packet,
            };
            *received += 1;
            on_event(&event)
        });
        Batch {
            events: *received - before,
            held: drained.held,
        }
    }

    /// Events produced, received and lost.
    pub fn delivery(&self) -> Delivery {
        // Events the kernel kept (aggregated, or a start time stored)
        // were delivered there; the kernel counts them apart from those it
        // sends, one count per event.
        let seen: Vec<u64> = self
            .counter(Counter::Seen)
            .iter()
            .zip(self.counter(Counter::Aggregated))
            .map(|(sent, kept)| sent + kept)
            .collect();
        Delivery::new(
            self.received + self.aggregated(),
            &seen,
            self.counter(Counter::RingFull),
            ring::peak_percent(&self.rings),
        )
        .with_skipped(self.skipped())
    }

    /// Runs of the program's probes the kernel skipped (see
    /// [`ebpf::skipped`]): events lost to it uncounted elsewhere.
    pub fn skipped(&self) -> u64 {
        self.skipped_at_detach.unwrap_or_else(|| {
            let own = (self.module_attached.iter())
                .map(|attached| ebpf::recursion_misses(attached.program()).unwrap_or(0));
            ebpf::skipped(self.ebpf.programs().map(|(_, program)| program)) + own.sum::<u64>()
        })
    }

    /// Events aggregated in the kernel, or whose start time it kept,
    /// rather than sent.
    pub fn aggregated(&self) -> u64 {
        self.counter(Counter::Aggregated).iter().sum()
    }

    /// Start times the kernel had no room to keep.
    pub fn starts_lost(&self) -> u64 {
        self.counter(Counter::StartsLost).iter().sum()
    }

    /// `counter` on each CPU.
    fn counter(&self, counter: Counter) -> Vec<u64> {
        self.counters.per_cpu(counter as u32)
    }

    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

/// A record's [`Header::ns`], its first field; 0 for a record too short
/// to hold one (counted as malformed when it is handled).
fn record_ns(record: &[u8]) -> u64 {
    record
        .first_chunk::<8>()
        .map_or(0, |ns| u64::from_ne_bytes(*ns))
}

/// `union bpf_attr` for `BPF_LINK_CREATE` of a perf event.
#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
    zero: [u64; 4],
}
const BPF_LINK_CREATE: libc::c_long = 28;

/// `union bpf_attr` for `BPF_PROG_TEST_RUN`: a raw tracepoint program run
/// once with a context of zeroed arguments.
#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// Runs raw tracepoint program `fd` once, in this thread.
fn test_run(fd: RawFd) -> Result<()> {
    // The most arguments a raw tracepoint has, all zero: none is read.
    let args = [0u64; 12];
    let mut attr = TestRun {
        prog_fd: u32::try_from(fd)
            .ok()
            .context("a program fd is not negative")?,
        ctx_size_in: std::mem::size_of_val(&args) as u32,
        ctx_in: args.as_ptr() as u64,
        ..TestRun::default()
    };
    // `args` outlives the call.
    ebpf::bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(())
}
const BPF_PERF_EVENT: u32 = 41;

/// The fd of program `name` of `ebpf`, loading it on first use.
fn program(ebpf: &mut Ebpf, name: &str) -> Result<RawFd> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("the trace program {name} is missing"))?;
    macro_rules! fd_or_load {
        ($p:expr) => {{
            if $p.fd().is_err() {
                $p.load()
                    .with_context(|| format!("the kernel rejected {name}"))?;
            }
            $p.fd()?.as_fd().as_raw_fd()
        }};
    }
    Ok(match program {
        Program::TracePoint(p) => fd_or_load!(p),
        Program::KProbe(p) => fd_or_load!(p),
        Program::PerfEvent(p) => fd_or_load!(p),
        Program::UProbe(p) => fd_or_load!(p),
        Program::RawTracePoint(p) => fd_or_load!(p),
        _ => bail!("{name} is not a trace program"),
    })
}

/// The name of copy `copy` of the tracepoint program of `width`
/// ([`TRACEPOINT_WIDTHS`]).
fn tracepoint_copy(width: u32, copy: usize) -> String {
    let width = if width > 0 {
        format!("_w{width}")
    } else {
        String::new()
    };
    let copy = if copy > 0 {
        format!("_{copy}")
    } else {
        String::new()
    };
    format!("{TRACEPOINT_PROGRAM}{width}{copy}")
}

/// The widest of [`TRACEPOINT_WIDTHS`] within the record of `attach`, a
/// tracepoint: where its last field ends, as far as weft reads it (an
/// `int` in an 8-byte slot ends 4 bytes early, which errs narrow). The
/// kernel refuses a program that loads in place past the record's end.
fn tracepoint_width(attach: &Attach) -> u32 {
    let end = (attach.fields.iter())
        .map(|f| u32::from(f.offset) + u32::from(f.size))
        .max()
        .unwrap_or(0);
    (TRACEPOINT_WIDTHS.into_iter())
        .filter(|&w| w <= end)
        .max()
        .unwrap_or(0)
}

/// The program that attach points of `attach`'s kind share, if they do
/// (copies serve fentry, fexit and raw tracepoints).
fn shared_program(attach: &Attach) -> Option<String> {
    let name = match &attach.target {
        Target::Tracepoint { .. } if attach.hook == Hook::Raw => return None,
        Target::Tracepoint { .. } => return Some(tracepoint_copy(tracepoint_width(attach), 0)),
        Target::Kprobe { .. } => KPROBE_PROGRAM,
        Target::Uprobe { exit: false, .. } | Target::Usdt { .. } => UPROBE_PROGRAM,
        Target::Uprobe { exit: true, .. } => URETPROBE_PROGRAM,
        Target::Profile { .. }
        | Target::PerfEvent { .. }
        | Target::Watchpoint { .. }
        | Target::WatchArg { .. } => PERF_PROGRAM,
        _ => return None,
    };
    Some(name.to_owned())
}

/// Opens `builder`'s event for every process.
fn open_perf_event(builder: &mut Builder<'_>) -> Result<perf_event::Counter> {
    builder
        .any_pid()
        .exclude_kernel(false)
        .build()
        .context("perf_event_open failed")
}

/// A perf event builder for `event`.
fn perf_builder(event: PerfEvent) -> Builder<'static> {
    match event {
        PerfEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
        PerfEvent::TaskClock => Builder::new(Software::TASK_CLOCK),
        PerfEvent::PageFaults => Builder::new(Software::PAGE_FAULTS),
        PerfEvent::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        PerfEvent::CpuMigrations => Builder::new(Software::CPU_MIGRATIONS),
        PerfEvent::MinorFaults => Builder::new(Software::PAGE_FAULTS_MIN),
        PerfEvent::MajorFaults => Builder::new(Software::PAGE_FAULTS_MAJ),
        PerfEvent::AlignmentFaults => Builder::new(Software::ALIGNMENT_FAULTS),
        PerfEvent::EmulationFaults => Builder::new(Software::EMULATION_FAULTS),
        PerfEvent::CpuCycles => Builder::new(Hardware::CPU_CYCLES),
        PerfEvent::Instructions => Builder::new(Hardware::INSTRUCTIONS),
        PerfEvent::CacheReferences => Builder::new(Hardware::CACHE_REFERENCES),
        PerfEvent::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
        PerfEvent::BranchInstructions => Builder::new(Hardware::BRANCH_INSTRUCTIONS),
        PerfEvent::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
        PerfEvent::BusCycles => Builder::new(Hardware::BUS_CYCLES),
        PerfEvent::FrontendStalls => Builder::new(Hardware::STALLED_CYCLES_FRONTEND),
        PerfEvent::BackendStalls => Builder::new(Hardware::STALLED_CYCLES_BACKEND),
        PerfEvent::RefCycles => Builder::new(Hardware::REF_CPU_CYCLES),
    }
}

/// `event` enabled, and program `fd` attached to it with `cookie`.
fn enabled_link(fd: RawFd, mut event: perf_event::Counter, cookie: u64) -> Result<Link> {
    event.enable().context("failed to enable the perf event")?;
    link_perf_event(fd, event, cookie)
}

/// Links program `prog_fd` to perf event `event` with `cookie`, which the
/// program reads with `bpf_get_attach_cookie` (aya's attach functions set
/// none). Needs Linux 5.15.
fn link_perf_event(prog_fd: RawFd, event: perf_event::Counter, cookie: u64) -> Result<Link> {
    let mut attr = LinkCreate {
        prog_fd: prog_fd.cast_unsigned(),
        target_fd: event.as_raw_fd().cast_unsigned(),
        attach_type: BPF_PERF_EVENT,
        flags: 0,
        bpf_cookie: cookie,
        zero: [0; 4],
    };
    let fd = ebpf::bpf(BPF_LINK_CREATE, &mut attr)
        .context("BPF_LINK_CREATE with a cookie failed (Linux 5.15 or later is needed)")?;
    // SAFETY: the syscall returned a new file descriptor that nothing else owns.
    let link = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    Ok(Link {
        _event: event,
        _link: link,
    })
}
