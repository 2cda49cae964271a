//! The syscall probe from user space: configures and loads
//! `ebpf/src/syscall.rs`, attaches it, drains its per-CPU rings and reads its
//! loss counters.

use std::{
    collections::HashMap as StdHashMap,
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    programs::{RawTracePoint, RawTracePointRunOptions, TestRun as _, TracePoint},
};
use weft_abi::ring::{self, Drained, Ring};
use weft_abi::syscall::{
    BATCHES_MAP, CONFIG_GLOBAL, COUNTER_ROW, COUNTERS, COUNTERS_MAP, Counter, EVENT_SIZE,
    FILTER_CGROUP, FILTER_COMM, FILTER_PID, FLUSH_PROGRAM, PIDS_MAP, RINGS_MAP, SyscallConfig,
};

use crate::{batches::Batches, counters::CounterArray, delivery::Delivery, ebpf, rings::RingArray};

/// How old a CPU's oldest unsent record may grow before weft has that CPU
/// send its batch: a busy CPU fills one in microseconds, a quiet one may
/// take seconds, and live views should not wait that long.
const FLUSH_AGE: Duration = Duration::from_millis(20);

/// Which threads and syscalls to trace; applied in the kernel.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Thread group ids; empty means all.
    pub pids: Vec<u32>,
    /// Task name; `None` means all.
    pub comm: Option<String>,
    /// Syscall numbers; empty means all.
    pub syscalls: Vec<u32>,
    /// Shorter syscalls are dropped in the kernel.
    pub min_duration: Duration,
    /// Only threads in this cgroup (v2 id, its directory's inode).
    pub cgroup: Option<u64>,
}

/// Where the programs attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachPoints {
    /// Raw tracepoints `sys_enter`/`sys_exit`: every syscall runs the probe.
    Raw,
    /// `syscalls:sys_enter_NAME`/`sys_exit_NAME` of the filtered syscalls only.
    PerSyscall,
}

/// Everything needed to load the probe.
#[derive(Debug, Clone)]
pub struct Options {
    pub filter: Filter,
    pub attach: AttachPoints,
    /// Bytes per CPU ring; a power of two and a multiple of the page size.
    pub ring_bytes: u32,
}

/// Loss and pairing counters, per CPU, indexed by [`Counter`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub per_cpu: Vec<[u64; COUNTERS as usize]>,
}

impl Counters {
    /// The sum of `counter` over all CPUs.
    pub fn total(&self, counter: Counter) -> u64 {
        self.per_cpu.iter().map(|c| c[counter as usize]).sum()
    }
}

/// What was received and lost in a capture, from the counters and the
/// number of records drained: what `stat` prints and `record` stores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Losses {
    pub delivery: Delivery,
    pub enter_table_full: u64,
    pub unpaired_exits: u64,
}

impl Losses {
    /// From the counters, each CPU's count of syscalls seen, the records
    /// drained and the rings' peak fill.
    pub fn new(counters: &Counters, seen: &[u64], received: u64, ring_peak_percent: u8) -> Self {
        let per_cpu = |counter: Counter| -> Vec<u64> {
            counters
                .per_cpu
                .iter()
                .map(|c| c[counter as usize])
                .collect()
        };
        Self {
            delivery: Delivery::new(
                received,
                seen,
                per_cpu(Counter::RingFull),
                ring_peak_percent,
            ),
            enter_table_full: counters.total(Counter::EnterTableFull),
            unpaired_exits: counters.total(Counter::ExitWithoutEnter),
        }
    }

    /// Records dropped: ring full plus entries that could not be stored.
    pub fn lost(&self) -> u64 {
        self.delivery.ring_full + self.enter_table_full + self.delivery.skipped
    }
}

/// The loaded and attached syscall probe.
pub struct SyscallProbe {
    ebpf: Ebpf,
    /// Messages the programs log on rare paths, printed through `log`.
    logger: aya_log::EbpfLogger<&'static dyn log::Log>,
    rings: Vec<Ring>,
    batches: Batches,
    counters: CounterArray,
    /// When stale batches are looked for next.
    next_flush: Instant,
    /// Whether a flush failed (said once).
    flush_failed: bool,
    programs: &'static [&'static str],
    ring_bytes: u32,
    /// What it was loaded with, for the capture's description.
    filter: Filter,
    /// Records drained so far.
    received: u64,
    /// The programs' costs when they were unloaded.
    last_costs: Vec<ebpf::ProgramCost>,
    /// Runs the kernel skipped, read as the programs were unloaded.
    last_skipped: u64,
    /// Ring records not made of whole [`SyscallEvent`]s; never expected.
    malformed: u64,
}

const RAW_PROGRAMS: &[&str] = &["syscall_enter", "syscall_exit"];
const TP_PROGRAMS: &[&str] = &["syscall_enter_tp", "syscall_exit_tp"];

impl SyscallProbe {
    /// Loads, configures and attaches the probe.
    pub fn load(options: &Options) -> Result<Self> {
        let config = kernel_config(&options.filter);
        let cpus = ebpf::cpus()?;
        let tracefs = ebpf::tracefs()?;
        // Made while the loader reads the kernel's BTF; filled while the
        // object loads.
        let rings = RingArray::spawn(cpus, options.ring_bytes);
        let mut loader = EbpfLoader::new();
        loader
            // aya has no user-space type for task storage; the kernel side
            // alone uses it, so aya only needs to create it.
            .allow_unsupported_maps()
            .override_global(CONFIG_GLOBAL, &config, true)
            .map_max_entries(RINGS_MAP, cpus)
            .map_max_entries(BATCHES_MAP, cpus)
            .map_max_entries(COUNTERS_MAP, cpus * COUNTER_ROW)
            .map_max_entries(PIDS_MAP, options.filter.pids.len().max(1) as u32);
        let (nr_offset, ret_offset);
        if options.attach == AttachPoints::PerSyscall {
            let name = first_syscall_name(&options.filter)?;
            nr_offset = ebpf::tracepoint_field(
                tracefs,
                "syscalls",
                &format!("sys_enter_{name}"),
                "__syscall_nr",
            )?
            .offset;
            ret_offset =
                ebpf::tracepoint_field(tracefs, "syscalls", &format!("sys_exit_{name}"), "ret")?
                    .offset;
            loader
                .override_global("SYSCALL_TP_NR_OFFSET", &nr_offset, true)
                .override_global("SYSCALL_TP_RET_OFFSET", &ret_offset, true);
        }
        let rings = rings.wait()?;
        rings.use_in(&mut loader, RINGS_MAP);
        let mut ebpf = loader
            .load(ebpf::object()?)
            .context("failed to load the syscall probe")?;
        let logger =
            aya_log::EbpfLogger::init(&mut ebpf).context("failed to read the probe's log")?;
        ebpf::fill_pids(&mut ebpf, PIDS_MAP, &options.filter.pids)?;
        let rings = rings.finish(&ebpf, RINGS_MAP)?;
        let Some(aya::maps::Map::Array(batches)) = ebpf.map(BATCHES_MAP) else {
            bail!("the probe has no batch array");
        };
        let batches = Batches::map(batches, cpus)?;
        let counters = CounterArray::map(&ebpf, COUNTERS_MAP, cpus, COUNTER_ROW)?;
        let flush: &mut RawTracePoint = ebpf
            .program_mut(FLUSH_PROGRAM)
            .context("program missing")?
            .try_into()?;
        flush
            .load()
            .with_context(|| format!("the kernel rejected {FLUSH_PROGRAM}"))?;
        let programs = match options.attach {
            AttachPoints::Raw => attach_raw(&mut ebpf)?,
            AttachPoints::PerSyscall => attach_per_syscall(&mut ebpf, &options.filter.syscalls)?,
        };
        Ok(Self {
            ebpf,
            logger,
            rings,
            batches,
            counters,
            next_flush: Instant::now(),
            flush_failed: false,
            programs,
            ring_bytes: options.ring_bytes,
            filter: options.filter.clone(),
            received: 0,
            last_costs: Vec::new(),
            last_skipped: 0,
            malformed: 0,
        })
    }

    /// Hands each syscall record waiting in the rings (a `SyscallEvent`'s
    /// bytes as they lie in the ring) to `on_record` with its arrival time,
    /// a bounded batch per ring (see [`ring::drain_each`]). Once detached
    /// and the rings are empty, the records the CPUs kept unsent follow.
    pub fn drain(&mut self, mut on_record: impl FnMut(u64, &[u8])) -> Drained {
        self.logger.flush();
        self.flush_stale();
        let (mut events, mut malformed) = (0, 0);
        let mut drained = ring::drain_each(&mut self.rings, |now, record| {
            if record.is_empty() || !record.len().is_multiple_of(EVENT_SIZE) {
                malformed += 1;
            } else {
                for event in record.chunks_exact(EVENT_SIZE) {
                    on_record(now, event);
                }
                events += (record.len() / EVENT_SIZE) as u64;
            }
            true
        });
        if self.programs.is_empty() && !drained.more {
            let now = ring::now_ns();
            events += self.batches.take(|event| on_record(now, event));
        }
        self.malformed += malformed;
        drained.records = events;
        self.received += events;
        drained
    }

    /// Has each CPU whose batch holds a record older than [`FLUSH_AGE`]
    /// send it (by running the flush program there), at most every half
    /// that age.
    fn flush_stale(&mut self) {
        let now = Instant::now();
        if now < self.next_flush || self.programs.is_empty() {
            return;
        }
        self.next_flush = now + FLUSH_AGE / 2;
        let before = ring::now_ns().saturating_sub(FLUSH_AGE.as_nanos() as u64);
        let stale: Vec<u32> = self.batches.stale(before).collect();
        for cpu in stale {
            // A busy batch (FLUSH_BUSY) is tried again next time; a CPU
            // gone offline keeps its batch until weft detaches.
            if let Err(error) = self.flush(cpu)
                && !self.flush_failed
            {
                self.flush_failed = true;
                log::warn!(
                    "failed to flush CPU {cpu}'s syscall records (they come at the end): {error:#}"
                );
            }
        }
    }

    /// Runs the flush program on `cpu`.
    fn flush(&mut self, cpu: u32) -> Result<()> {
        let program: &mut RawTracePoint = self
            .ebpf
            .program_mut(FLUSH_PROGRAM)
            .context("program missing")?
            .try_into()?;
        program.test_run(RawTracePointRunOptions {
            cpu: Some(cpu),
            ..RawTracePointRunOptions::new()
        })?;
        Ok(())
    }

    /// Where the probe is attached and how big its rings are, for humans.
    pub fn describe(&self) -> String {
        let hooks = if self.programs == RAW_PROGRAMS {
            "raw tracepoints sys_enter/sys_exit".to_owned()
        } else {
            "per-syscall tracepoints".to_owned()
        };
        format!(
            "{hooks}, {} rings of {} KiB",
            self.rings.len(),
            self.ring_bytes / 1024
        )
    }

    /// The threads and syscalls it was loaded to trace.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// What each of its programs has cost so far (zero unless
    /// [`ebpf::enable_run_stats`] is held).
    pub fn costs(&self) -> Result<Vec<ebpf::ProgramCost>> {
        if self.programs.is_empty() {
            return Ok(self.last_costs.clone());
        }
        self.programs
            .iter()
            .map(|&name| {
                let info = match self.ebpf.program(name).context("program vanished")? {
                    aya::programs::Program::RawTracePoint(p) => p.info()?,
                    aya::programs::Program::TracePoint(p) => p.info()?,
                    _ => bail!("{name} has an unexpected program type"),
                };
                Ok(ebpf::ProgramCost {
                    name,
                    runs: info.run_count(),
                    run_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                })
            })
            .collect()
    }

    /// Ring records that were not whole records.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// What was received and lost so far, from the kernel-side counters.
    pub fn losses(&self) -> Losses {
        let mut losses = Losses::new(
            &self.counters(),
            &self.batches.seen(),
            self.received,
            ring::peak_percent(&self.rings),
        );
        losses.delivery.skipped = self.skipped();
        losses
    }

    /// Runs of its programs the kernel skipped (see [`ebpf::skipped`]).
    fn skipped(&self) -> u64 {
        if self.programs.is_empty() {
            return self.last_skipped;
        }
        ebpf::skipped((self.programs.iter()).filter_map(|name| self.ebpf.program(name)))
    }

    /// Reads the kernel-side counters.
    fn counters(&self) -> Counters {
        let mut per_cpu = Vec::new();
        for index in 0..COUNTERS {
            let values = self.counters.per_cpu(index);
            per_cpu.resize(values.len(), [0; COUNTERS as usize]);
            for (cpu, value) in values.iter().enumerate() {
                per_cpu[cpu][index as usize] = *value;
            }
        }
        Counters { per_cpu }
    }

    /// Detaches the programs. Records already in the rings and batches stay
    /// there and can still be drained; no new ones arrive.
    pub fn detach(&mut self) -> Result<()> {
        // Unloaded programs tell nothing more: what they cost is kept.
        self.last_costs = self.costs()?;
        self.last_skipped = self.skipped();
        for name in self.programs {
            let program = self.ebpf.program_mut(name).context("program vanished")?;
            match program {
                aya::programs::Program::RawTracePoint(p) => p.unload()?,
                aya::programs::Program::TracePoint(p) => p.unload()?,
                _ => bail!("{name} has an unexpected program type"),
            }
        }
        self.programs = &[];
        Ok(())
    }
}

fn kernel_config(filter: &Filter) -> SyscallConfig {
    let mut config = SyscallConfig::ALL;
    config.ignore_tgid = std::process::id();
    if !filter.pids.is_empty() {
        config.flags |= FILTER_PID;
    }
    if let Some(comm) = &filter.comm {
        config.flags |= FILTER_COMM;
        config.comm = weft_abi::comm_bytes(comm);
    }
    if let Some(cgroup) = filter.cgroup {
        config.flags |= FILTER_CGROUP;
        config.cgroup = cgroup;
    }
    for nr in &filter.syscalls {
        config.add_syscall(*nr);
    }
    config.min_duration_ns = u64::try_from(filter.min_duration.as_nanos()).unwrap_or(u64::MAX);
    config
}

/// The syscall whose tracepoint formats give the record offsets. Every
/// `sys_enter_*` (and `sys_exit_*`) record starts with the same fields, so
/// one syscall's format serves them all.
fn first_syscall_name(filter: &Filter) -> Result<&'static str> {
    let Some(nr) = filter.syscalls.first() else {
        bail!("per-syscall attach needs at least one --syscall");
    };
    weft_abi::syscall_names::name(*nr).context("syscall has no name")
}

fn attach_raw(ebpf: &mut Ebpf) -> Result<&'static [&'static str]> {
    for (name, tracepoint) in RAW_PROGRAMS.iter().zip(["sys_enter", "sys_exit"]) {
        let program: &mut RawTracePoint = ebpf
            .program_mut(name)
            .context("program missing")?
            .try_into()?;
        program
            .load()
            .with_context(|| format!("the kernel rejected {name}"))?;
        program
            .attach(tracepoint)
            .with_context(|| format!("failed to attach to raw tracepoint {tracepoint}"))?;
    }
    Ok(RAW_PROGRAMS)
}

fn attach_per_syscall(ebpf: &mut Ebpf, syscalls: &[u32]) -> Result<&'static [&'static str]> {
    let names: StdHashMap<u32, &str> = syscalls
        .iter()
        .filter_map(|nr| Some((*nr, weft_abi::syscall_names::name(*nr)?)))
        .collect();
    for (program, prefix) in TP_PROGRAMS.iter().zip(["sys_enter_", "sys_exit_"]) {
        let tp: &mut TracePoint = ebpf
            .program_mut(program)
            .context("program missing")?
            .try_into()?;
        tp.load()
            .with_context(|| format!("the kernel rejected {program}"))?;
        for name in names.values() {
            let event = format!("{prefix}{name}");
            tp.attach("syscalls", &event).with_context(|| {
                format!("failed to attach to tracepoint syscalls:{event} (does {name} have one?)")
            })?;
        }
    }
    Ok(TP_PROGRAMS)
}
