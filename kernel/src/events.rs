//! The event sources besides syscalls from user space: loads the chosen
//! sources' programs (`ebpf/src/events.rs` and one module per source),
//! attaches them, drains the shared per-CPU rings and reads the per-source
//! loss counters.

use std::{path::Path, rc::Rc};

use crate::error::{Context as _, Error, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, StackTraceMap},
    programs::{
        PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        trace_point::TracePointLinkId,
    },
};
use weft_abi::events::{
    CONFIG_GLOBAL, COUNTER_ROW, COUNTERS, COUNTERS_MAP, Counter, EventConfig, FILTER_CGROUP,
    FILTER_COMM, FILTER_PID, PIDS_MAP, RINGS_MAP, SOURCES, Source,
};
use weft_abi::ring::{self, Drained, Ring};
use weft_abi::stacks::{MAX_STACKS, SCHED_STACKS_GLOBAL, STACKS_MAP};
use weft_abi::tracefs::find_field;

use weft_oneliner::Stack;

use crate::{
    counters::CounterArray,
    delivery::Delivery,
    ebpf,
    oneliner::stacks::Stacks,
    rings::RingArray,
    source::{Hook, SourceHooks},
    tc,
};

/// Which threads to trace; applied in the kernel, to the thread a record
/// is about.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub pids: Vec<u32>,
    pub comm: Option<String>,
    /// A cgroup v2 id (the directory's inode number).
    pub cgroup: Option<u64>,
    /// Interfaces, ports and addresses of the packet source.
    pub net: tc::NetOptions,
    /// Samples per second per CPU of the stack source (0: its default).
    pub stack_hz: u64,
}

/// The stacks the stack source's and the scheduler's records name by id:
/// read from the kernel's stack map, named once each.
pub struct StackReader {
    map: StackTraceMap<MapData>,
    naming: Stacks,
}

/// Named stacks and processes a recording keeps: past it they are named
/// afresh, so that a recorder left running among short-lived processes
/// does not hold each one's symbols forever.
const MAX_NAMED: usize = 1 << 16;

impl StackReader {
    fn new(map: StackTraceMap<MapData>) -> Self {
        Self {
            map,
            naming: Stacks::new(weft_symbols::Finder::new(Vec::new(), true)),
        }
    }

    /// Kernel stack `id` (none when the map has no such stack).
    pub fn kernel(&mut self, id: i32) -> Option<Rc<Stack>> {
        self.bound();
        self.naming.kernel(&self.map, id)
    }

    /// Process `pid`'s user stack `id`.
    pub fn user(&mut self, pid: u32, id: i32) -> Option<Rc<Stack>> {
        self.bound();
        self.naming.user(&self.map, pid, id)
    }

    fn bound(&mut self) {
        if self.naming.held() >= MAX_NAMED {
            self.naming = Stacks::new(weft_symbols::Finder::new(Vec::new(), true));
        }
    }
}

/// The stack source's sampling program.
const SAMPLE_PROGRAM: &str = "stacks_sample";

/// What was produced, received and lost for one source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceLosses {
    pub delivery: Delivery,
    /// Interval starts that could not be remembered (counted apart: the
    /// record that would have ended them was never produced).
    pub table_full: u64,
}

impl SourceLosses {
    pub fn lost(&self) -> u64 {
        self.delivery.ring_full + self.delivery.skipped
    }
}

/// The loaded and attached sources.
pub struct EventProbe {
    ebpf: Ebpf,
    rings: Vec<Ring>,
    counters: CounterArray,
    sources: Vec<&'static SourceHooks>,
    /// Records drained, by `Source` value.
    received: [u64; SOURCES as usize],
    /// Records too short for their source, or of no known source; never expected.
    malformed: u64,
    attached: bool,
    /// Each tracepoint attachment, by its program: detached all at once.
    links: Vec<(&'static str, TracePointLinkId)>,
    /// Each source's runs the kernel skipped, read as they were detached.
    skipped_at_detach: Vec<u64>,
    /// Where the packet source is attached, when it is.
    net: Option<tc::Attachment>,
    /// The stack ids' frames, until the recording takes them.
    stacks: Option<StackReader>,
}

impl EventProbe {
    /// Loads the programs of `sources`, fills in their tracepoint offsets and
    /// filters, and attaches them.
    pub fn load(
        sources: &[&'static SourceHooks],
        filter: &Filter,
        ring_bytes: u32,
    ) -> Result<Self> {
        let tracefs = ebpf::tracefs()?;
        let cpus = ebpf::cpus()?;
        let config = kernel_config(filter);
        let mut offsets = Vec::new();
        let mut hooks = Vec::new();
        for wanted in sources {
            let available = wanted.availability(tracefs);
            if let Some(why) = available.missing {
                bail!("source {}: {why}", wanted.name);
            }
            for lack in available.lacks {
                log::warn!("weft: {}: {lack}", wanted.name);
            }
            for hook in available.present {
                offsets.extend(hook_offsets(tracefs, hook)?);
                hooks.push((wanted.name, hook));
            }
        }
        // Made while the loader reads the kernel's BTF; filled while the
        // object loads.
        let rings = RingArray::spawn(cpus, ring_bytes);
        let mut loader = EbpfLoader::new();
        loader
            .allow_unsupported_maps()
            .override_global(CONFIG_GLOBAL, &config, true)
            .map_max_entries(RINGS_MAP, cpus)
            .map_max_entries(COUNTERS_MAP, cpus * COUNTER_ROW)
            .map_max_entries(PIDS_MAP, filter.pids.len().max(1) as u32);
        for (global, offset) in &offsets {
            loader.override_global(global, offset, true);
        }
        // The stack map is large (a stack of 127 frames per id): the
        // smallest the kernel takes unless stacks are recorded.
        let stacks = sources.iter().any(|wanted| wanted.sampled);
        let sched_stacks = u32::from(stacks);
        loader
            .map_max_entries(STACKS_MAP, if stacks { MAX_STACKS } else { 1 })
            .override_global(SCHED_STACKS_GLOBAL, &sched_stacks, true);
        let net_flags = filter.net.flags();
        loader.override_global(weft_abi::net::FLAGS_GLOBAL, &net_flags, true);
        loader.override_global(weft_abi::net::SNAPLEN_GLOBAL, &filter.net.snaplen, true);
        let rings = rings.wait()?;
        rings.use_in(&mut loader, RINGS_MAP);
        let mut ebpf = loader
            .load(ebpf::object()?)
            .context("failed to load the event sources")?;
        ebpf::fill_pids(&mut ebpf, PIDS_MAP, &filter.pids)?;
        tc::fill_filters(&mut ebpf, &filter.net)?;
        let rings = rings.finish(&ebpf, RINGS_MAP)?;
        let counters = CounterArray::map(&ebpf, COUNTERS_MAP, cpus, COUNTER_ROW)?;
        let stack_reader = if stacks {
            let map = ebpf
                .take_map(STACKS_MAP)
                .context("the probe has no stack map")?;
            Some(StackReader::new(StackTraceMap::try_from(map)?))
        } else {
            None
        };
        let mut probe = Self {
            ebpf,
            rings,
            counters,
            sources: sources.to_vec(),
            received: [0; SOURCES as usize],
            malformed: 0,
            attached: false,
            links: Vec::new(),
            skipped_at_detach: Vec::new(),
            net: None,
            stacks: stack_reader,
        };
        for (source, hook) in hooks {
            probe.attach(source, hook)?;
        }
        if sources.iter().any(|wanted| wanted.tc) {
            probe.net = Some(tc::attach(&mut probe.ebpf, &filter.net)?);
        }
        if stacks {
            let hz = match filter.stack_hz {
                0 => weft_abi::stacks::DEFAULT_HZ,
                hz => hz,
            };
            probe.attach_sampling(hz)?;
        }
        probe.attached = true;
        Ok(probe)
    }

    /// Attaches the stack source's program to a CPU clock event sampling
    /// `hz` times a second on each online CPU.
    fn attach_sampling(&mut self, hz: u64) -> Result<()> {
        let program: &mut PerfEvent = self
            .ebpf
            .program_mut(SAMPLE_PROGRAM)
            .with_context(|| format!("program {SAMPLE_PROGRAM} missing"))?
            .try_into()?;
        program
            .load()
            .with_context(|| format!("the kernel rejected {SAMPLE_PROGRAM}"))?;
        let cpus = aya::util::online_cpus().map_err(|(path, e)| Error::Kernel {
            doing: format!("failed to read {path}"),
            cause: Box::new(e.into()),
        })?;
        for cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(hz),
                    false,
                )
                .with_context(|| format!("source stacks: failed to sample CPU {cpu}"))?;
        }
        Ok(())
    }

    /// The stacks the records name, for the recording to read (once:
    /// `None` after, and without the stack source).
    pub fn take_stacks(&mut self) -> Option<StackReader> {
        self.stacks.take()
    }

    /// Attaches `hook`'s program (loading it first if no other hook has)
    /// to its tracepoint.
    fn attach(&mut self, source: &str, hook: &Hook) -> Result<()> {
        let program: &mut TracePoint = self
            .ebpf
            .program_mut(hook.program)
            .with_context(|| format!("program {} missing", hook.program))?
            .try_into()?;
        if program.fd().is_err() {
            program
                .load()
                .with_context(|| format!("the kernel rejected {}", hook.program))?;
        }
        let link = program.attach(hook.category, hook.event).with_context(|| {
            format!(
                "source {source}: failed to attach to tracepoint {}:{}",
                hook.category, hook.event
            )
        })?;
        self.links.push((hook.program, link));
        Ok(())
    }

    /// Hands each record waiting in the rings to `on_record` with its
    /// source and arrival time, a bounded batch per ring (see
    /// [`ring::drain_each`]).
    pub fn drain(
        &mut self,
        mut on_record: impl FnMut(&'static SourceHooks, u64, &[u8]),
    ) -> Drained {
        let Self {
            rings,
            sources,
            received,
            malformed,
            ..
        } = self;
        ring::drain_each(rings, |now, item| {
            let source = item
                .get(..4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let loaded = source
                .and_then(Source::from_u32)
                .and_then(|s| sources.iter().find(|loaded| loaded.source == s));
            match loaded {
                Some(loaded) if item.len() >= loaded.size => {
                    // As the kernel wrote it: only the packet source
                    // sends bytes past its record's size.
                    on_record(loaded, now, item);
                    received[loaded.source as usize] += 1;
                }
                _ => *malformed += 1,
            }
            true
        })
    }

    /// Each loaded source's name and where it is attached, for the
    /// capture's description.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        self.sources
            .iter()
            .map(|loaded| {
                let attach = if loaded.tc {
                    self.net_attach().unwrap_or_default()
                } else if loaded.sampled {
                    "perf cpu-clock on every CPU".to_owned()
                } else {
                    let hooks: Vec<String> = loaded
                        .hooks
                        .iter()
                        .map(|h| format!("tracepoint {}:{}", h.category, h.event))
                        .collect();
                    hooks.join(", ")
                };
                (loaded.name, attach)
            })
            .collect()
    }

    /// Records that were too short or of no loaded source.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Each loaded source's counters, summed over CPUs, with records received.
    pub fn losses(&self) -> Vec<(&'static SourceHooks, SourceLosses)> {
        let per_cpu = |source: Source, counter: Counter| {
            self.counters
                .per_cpu(source as u32 * COUNTERS + counter as u32)
        };
        self.sources
            .iter()
            .enumerate()
            .map(|(i, loaded)| {
                let received = self.received[loaded.source as usize];
                let skipped = (self.skipped_at_detach.get(i).copied())
                    .unwrap_or_else(|| self.skipped(loaded));
                let delivery = Delivery::new(
                    received,
                    &per_cpu(loaded.source, Counter::Seen),
                    per_cpu(loaded.source, Counter::RingFull),
                    ring::peak_percent(&self.rings),
                )
                .with_skipped(skipped);
                let table_full = per_cpu(loaded.source, Counter::TableFull).iter().sum();
                let losses = SourceLosses {
                    delivery,
                    table_full,
                };
                (*loaded, losses)
            })
            .collect()
    }

    /// Runs of `loaded`'s programs the kernel skipped (see
    /// [`ebpf::skipped`]), each program once: one serves several hooks
    /// (`sched_wakeup` and `sched_wakeup_new`), and its count is theirs.
    fn skipped(&self, loaded: &SourceHooks) -> u64 {
        let mut names: Vec<&str> = loaded.hooks.iter().map(|hook| hook.program).collect();
        names.sort_unstable();
        names.dedup();
        ebpf::skipped(names.into_iter().filter_map(|name| self.ebpf.program(name)))
    }

    /// Detaches every program; what is in the rings can still be drained.
    pub fn detach(&mut self) {
        if !std::mem::take(&mut self.attached) {
            return;
        }
        // Read while the programs are loaded; none can run once detached.
        self.skipped_at_detach = self.sources.iter().map(|l| self.skipped(l)).collect();
        let mut links = Vec::new();
        for (program, id) in std::mem::take(&mut self.links) {
            if let Some(aya::programs::Program::TracePoint(p)) = self.ebpf.program_mut(program)
                && let Ok(link) = p.take_link(id)
            {
                links.push(link);
            }
        }
        ebpf::close_at_once(links);
        for loaded in &self.sources {
            for hook in loaded.hooks {
                if let Some(aya::programs::Program::TracePoint(p)) =
                    self.ebpf.program_mut(hook.program)
                {
                    // Unloading detaches every link of the program at once.
                    let _ = p.unload();
                }
            }
            if loaded.sampled
                && let Some(aya::programs::Program::PerfEvent(p)) =
                    self.ebpf.program_mut(SAMPLE_PROGRAM)
            {
                let _ = p.unload();
            }
        }
        if let Some(net) = &mut self.net {
            net.detach(&mut self.ebpf);
        }
    }

    /// The interfaces the packet source is attached to, by index and name.
    pub fn net_interfaces(&self) -> Vec<(u32, String)> {
        self.net
            .as_ref()
            .map(tc::Attachment::interfaces)
            .unwrap_or_default()
    }

    /// How the packet source is attached, when it is.
    fn net_attach(&self) -> Option<String> {
        self.net.as_ref().map(tc::Attachment::describe)
    }

    /// Attaches the packet source to interfaces that came up since the
    /// last call, when it follows them, and says so.
    pub fn attach_new_interfaces(&mut self) {
        if !self.attached {
            return;
        }
        if let Some(net) = &mut self.net {
            for interface in net.attach_new(&mut self.ebpf) {
                log::info!("weft: net: attached to {interface}, which came up");
            }
        }
    }
}

/// The offsets `hook`'s program reads, from one read of its tracepoint's
/// format: (global, offset) pairs, `u32::MAX` for an optional field this
/// kernel lacks.
fn hook_offsets(tracefs: &Path, hook: &Hook) -> Result<Vec<(&'static str, u32)>> {
    let format = ebpf::read_tracepoint_format(tracefs, hook.category, hook.event)?;
    hook.offsets
        .iter()
        .map(|(global, field)| {
            let (name, optional) = field
                .strip_suffix('?')
                .map_or((*field, false), |f| (f, true));
            match find_field(&format, name) {
                Some(found) => Ok((*global, found.offset)),
                None if optional => Ok((*global, u32::MAX)),
                None => bail!(
                    "tracepoint {}:{}: no field `{name}`",
                    hook.category,
                    hook.event
                ),
            }
        })
        .collect()
}

fn kernel_config(filter: &Filter) -> EventConfig {
    let mut config = EventConfig::ALL;
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
    config
}
