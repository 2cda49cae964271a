//! `weft stat`: per-syscall (or, with `--by`, per-process, per-thread or
//! per-name) counts, errors, rates and latency percentiles, with every lost
//! event shown, printed per interval and in total.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    io::{self, Write},
    sync::Arc,
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result};
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use weft_abi::syscall::SyscallEvent;
use weft_kernel::{
    ebpf::{self, ProgramCost},
    syscall::{Losses, Options, SyscallProbe},
};

use crate::{
    command::Command,
    probe::{self, Accounting, Arrival, Consumer, Probes},
    session::{self, Session},
};

/// `weft stat` resolved from its arguments.
#[derive(Debug)]
pub struct StatPlan {
    pub options: Options,
    pub duration: Option<Duration>,
    /// Print a table (or JSON object) this often, besides the total.
    pub interval: Option<Duration>,
    pub drain_interval: Duration,
    /// JSON objects instead of tables.
    pub json: bool,
    /// What a row counts: a syscall, a process, a thread or a name.
    pub by: By,
    /// Turn on the kernel's BPF run-time statistics and print what weft's
    /// programs cost per run.
    pub cost: bool,
}

/// What each row of the table counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum By {
    /// A syscall (`strace -c`).
    #[default]
    Syscall,
    /// A process, its pid and name (`syscount -P`).
    Pid,
    /// A thread, its tid and name.
    Tid,
    /// A task name: every thread of that name (`syscount`'s by-comm view).
    Comm,
}

impl By {
    /// The table's first column, the JSON list, and the JSON names of a
    /// row's name and id.
    fn labels(
        self,
    ) -> (
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
    ) {
        match self {
            Self::Syscall => ("SYSCALL", "syscalls", "name", Some("nr")),
            Self::Pid => ("PID     COMM", "processes", "comm", Some("pid")),
            Self::Tid => ("TID     COMM", "threads", "comm", Some("tid")),
            Self::Comm => ("COMM", "comms", "comm", None),
        }
    }
}

/// Latency of one row's calls: a histogram for percentiles plus the exact
/// extremes (the histogram rounds them to 3 significant digits), and how
/// many failed with each errno.
#[derive(Clone)]
struct Latency {
    histogram: Histogram<u64>,
    min: u64,
    max: u64,
    errnos: BTreeMap<u16, u64>,
}

impl Latency {
    fn new() -> Self {
        Self {
            histogram: Histogram::new(3).expect("3 significant figures is valid"),
            min: u64::MAX,
            max: 0,
            errnos: BTreeMap::new(),
        }
    }

    fn record(&mut self, ns: u64, ret: i64) {
        // An error return is -errno, as strace -c counts it.
        if (-4095..0).contains(&ret) {
            *self.errnos.entry(ret.unsigned_abs() as u16).or_default() += 1;
        }
        // The histogram grows to fit; only values beyond its absolute limit
        // (about 292 years) are clamped.
        if self.histogram.record(ns).is_err() {
            self.histogram.saturating_record(ns);
        }
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    fn add(&mut self, other: &Latency) {
        self.histogram
            .add(&other.histogram)
            .expect("auto-resizing histograms always add");
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for (errno, n) in &other.errnos {
            *self.errnos.entry(*errno).or_default() += n;
        }
    }
}

/// Latency per row: per syscall number, or per process.
#[derive(Default)]
pub struct Stats {
    by_nr: BTreeMap<u32, Latency>,
}

impl Stats {
    /// Adds `event` to the row `id` (its syscall number or its process).
    pub fn record(&mut self, id: u32, event: &SyscallEvent) {
        self.by_nr
            .entry(id)
            .or_insert_with(Latency::new)
            .record(event.duration_ns, event.ret);
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        for (nr, latency) in &other.by_nr {
            match self.by_nr.get_mut(nr) {
                Some(mine) => mine.add(latency),
                None => {
                    self.by_nr.insert(*nr, latency.clone());
                }
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.by_nr.values().map(|l| l.histogram.len()).sum()
    }

    /// One row per id, most frequent first, named by `name`.
    pub fn rows(&self, elapsed: Duration, name: impl Fn(u32) -> String) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .by_nr
            .iter()
            .map(|(nr, latency)| {
                let h = &latency.histogram;
                // Histogram buckets round up; never report past the exact max.
                let at = |q: f64| h.value_at_quantile(q).clamp(latency.min, latency.max);
                Row {
                    id: *nr,
                    name: name(*nr),
                    count: h.len(),
                    errors: latency.errnos.values().sum(),
                    // The most frequent, the lowest number among equals.
                    top_errno: (latency.errnos.iter())
                        .max_by_key(|(errno, n)| (**n, std::cmp::Reverse(**errno)))
                        .map(|(errno, _)| *errno),
                    rate: h.len() as f64 / elapsed.as_secs_f64().max(1e-9),
                    min: latency.min,
                    p50: at(0.50),
                    p90: at(0.90),
                    p99: at(0.99),
                    p999: at(0.999),
                    max: latency.max,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        rows
    }
}

/// One syscall's (or process's) line in the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The syscall's number, or the process id.
    pub id: u32,
    /// The syscall's name, or the process's.
    pub name: String,
    pub count: u64,
    /// Calls that returned an error (-4095..-1).
    pub errors: u64,
    /// The errno they returned most often.
    pub top_errno: Option<u16>,
    pub rate: f64,
    /// Exact minimum, in ns.
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    /// Exact maximum, in ns.
    pub max: u64,
}

/// The errors column: the count, then the most frequent errno's name
/// (`700 EBADF`), as `strace -c` users read it.
fn errors_cell(row: &Row) -> String {
    match row.top_errno {
        Some(errno) => format!("{} {}", row.errors, errno_name(errno)),
        None => row.errors.to_string(),
    }
}

/// `EBADF` for 9, as glibc names error numbers (`E123` for one it does
/// not know).
pub fn errno_name(errno: u16) -> String {
    unsafe extern "C" {
        /// glibc 2.32+: the errno's symbolic name, or NULL.
        fn strerrorname_np(errnum: libc::c_int) -> *const libc::c_char;
    }
    // SAFETY: glibc returns NULL or a static NUL-terminated string.
    let name = unsafe { strerrorname_np(libc::c_int::from(errno)) };
    if name.is_null() {
        return format!("E{errno}");
    }
    // SAFETY: non-null, static and NUL-terminated (above).
    unsafe { std::ffi::CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

fn syscall_name(nr: u32) -> String {
    weft_abi::syscall_names::name(nr).map_or_else(|| format!("syscall_{nr}"), str::to_owned)
}

/// Formats nanoseconds with a unit that keeps three significant digits.
pub fn human_ns(ns: u64) -> String {
    let ns = ns as f64;
    match ns {
        n if n < 1e3 => format!("{n:.0}ns"),
        n if n < 1e6 => format!("{:.3}us", n / 1e3),
        n if n < 1e9 => format!("{:.3}ms", n / 1e6),
        n => format!("{:.3}s", n / 1e9),
    }
}

fn human_rate(rate: f64) -> String {
    match rate {
        r if r < 1e3 => format!("{r:.1}"),
        r if r < 1e6 => format!("{:.1}k", r / 1e3),
        r => format!("{:.2}M", r / 1e6),
    }
}

/// The table for one interval or the whole run: a row per what `by` says.
pub fn render_table(title: &str, rows: &[Row], losses: &Losses, by: By) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_table(&mut out, title, rows, losses, by);
    out
}

fn write_table(
    out: &mut String,
    title: &str,
    rows: &[Row],
    losses: &Losses,
    by: By,
) -> std::fmt::Result {
    writeln!(out, "{title}")?;
    let (first, ..) = by.labels();
    writeln!(
        out,
        "{first:<24} {:>10} {:>16} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "COUNT", "ERRORS", "RATE/s", "P50", "P90", "P99", "P99.9", "MAX"
    )?;
    for row in rows {
        let first = match by {
            By::Pid | By::Tid => format!("{:<7} {}", row.id, row.name),
            By::Syscall | By::Comm => row.name.clone(),
        };
        writeln!(
            out,
            "{first:<24} {:>10} {:>16} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
            row.count,
            errors_cell(row),
            human_rate(row.rate),
            human_ns(row.p50),
            human_ns(row.p90),
            human_ns(row.p99),
            human_ns(row.p999),
            human_ns(row.max),
        )?;
    }
    writeln!(
        out,
        "lost {} (ring full {}, enter table full {}{}); received {} of {} seen; unpaired exits {}",
        losses.lost(),
        losses.delivery.ring_full,
        losses.enter_table_full,
        crate::probe::skipped(&losses.delivery),
        losses.delivery.received,
        losses.delivery.seen,
        losses.unpaired_exits,
    )?;
    if losses.delivery.ring_full > 0 {
        let cpus: Vec<String> = losses
            .delivery
            .ring_full_per_cpu
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(cpu, n)| format!("cpu{cpu} {n}"))
            .collect();
        writeln!(out, "ring full by CPU: {}", cpus.join(", "))?;
    }
    Ok(())
}

/// The JSON object for one interval or the whole run: its rows under
/// `syscalls` (`name`, `nr`), `processes` (`comm`, `pid`), `threads`
/// (`comm`, `tid`) or `comms` (`comm`).
pub fn render_json(kind: &str, elapsed: Duration, rows: &[Row], losses: &Losses, by: By) -> Value {
    let (_, list, name, id) = by.labels();
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut row = json!({
                name: r.name, "count": r.count, "errors": r.errors,
                "top_errno": r.top_errno.map(errno_name), "rate": r.rate,
                "min_ns": r.min, "p50_ns": r.p50, "p90_ns": r.p90, "p99_ns": r.p99,
                "p999_ns": r.p999, "max_ns": r.max,
            });
            if let Some(id) = id {
                row[id] = json!(r.id);
            }
            row
        })
        .collect();
    let mut object =
        serde_json::to_value(crate::probe::syscalls_noted(losses)).expect("counters serialize");
    object["kind"] = json!(kind);
    object["elapsed_s"] = json!(elapsed.as_secs_f64());
    object[list] = json!(rows);
    object
}

/// Runs `weft stat` until the duration ends, Ctrl-C or SIGTERM, printing
/// to `out`.
///
/// With `command`, the capture also ends when the command exits (its
/// cgroup is the plan's filter).
pub fn run(plan: &StatPlan, command: Option<Command>, out: &mut dyn Write) -> Result<()> {
    ebpf::check_privileges()?;
    // Before the load, so that no run of the programs goes uncounted. With
    // --cost on all the time; else a tenth of the time, for the last
    // line's time per syscall (none where the kernel keeps no statistics,
    // or the run ended before the first sample, 2 s in).
    let _stats = plan.cost.then(ebpf::enable_run_stats).transpose()?;
    let _sampled = (!plan.cost)
        .then(ebpf::sample_run_stats)
        .and_then(Result::ok);
    let probe = SyscallProbe::load(&plan.options)?;
    let ended = Arc::new(tokio::sync::Notify::new());
    let session = Session {
        drain_interval: plan.drain_interval,
        tick: plan.interval,
        duration: plan.duration,
        ready: format!(
            "weft: tracing syscalls on {}; Ctrl-C to stop",
            probe.describe()
        ),
        stop: command.as_ref().map(|_| Arc::clone(&ended)),
        poke: None,
    };
    let mut table = Table {
        plan,
        out,
        total: Stats::default(),
        current: Stats::default(),
        since: Instant::now(),
        tasks: Tasks::default(),
        costs: Vec::new(),
        // From here, not from the start of the process: loading the
        // programs is not tracing.
        cpu: weft_capture::usage::cpu_seconds(),
    };
    let cpu_start = table.cpu;
    let mut probes: Probes = vec![Box::new(probe)];
    // Let run now that the probes are attached; killed if still running
    // when tracing stops.
    let running = command.map(|command| command.run(Arc::clone(&ended)));
    let outcome = session::run(&session, &mut probes, &mut table)?;
    drop(running);
    let Table {
        mut total,
        current,
        out,
        tasks,
        ..
    } = table;
    total.merge(&current);
    let losses = syscall_losses(&outcome.accounting);
    // The whole run's cost: from zero (sampled without --cost).
    let costs = program_costs(&outcome.accounting, &[]);
    let rows = Rows {
        stats: &total,
        losses: &losses,
        names: &tasks.names,
        costs: &costs,
        cpu: weft_capture::usage::cpu_seconds() - cpu_start,
    };
    emit(plan, out, "total", outcome.elapsed, &rows)?;
    Ok(())
}

/// Tasks (processes or threads) `--by` gives rows of their own, or names
/// it reads; the calls of any more share the row [`OTHERS`].
const MAX_TASKS: usize = 4096;
/// The row of the tasks past [`MAX_TASKS`] (no pid or tid is this).
const OTHERS: u32 = u32::MAX;

/// The rows of tasks, each named once, when its first call arrives:
/// bounded, as a machine that starts processes without end must not grow
/// weft's tables without end.
#[derive(Default)]
struct Tasks {
    /// The row of each task seen (`--by comm`: its name's).
    rows: HashMap<u32, u32>,
    /// Each row's name.
    names: HashMap<u32, String>,
}

impl Tasks {
    /// The row of `event`'s process, thread or name.
    fn row(&mut self, by: By, event: &SyscallEvent) -> u32 {
        let task = if by == By::Pid { event.pid } else { event.tid };
        if let Some(row) = self.rows.get(&task) {
            return *row;
        }
        if self.rows.len() >= MAX_TASKS {
            self.names
                .entry(OTHERS)
                .or_insert_with(|| "(other tasks)".to_owned());
            return OTHERS;
        }
        // Gone already: its calls still count, under its id.
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{task}/comm", event.pid))
            .map_or_else(|_| "?".to_owned(), |c| c.trim_end().to_owned());
        let row = if by == By::Comm {
            let known = self.names.iter().find(|(_, name)| **name == comm);
            known.map_or(self.names.len() as u32, |(row, _)| *row)
        } else {
            task
        };
        self.rows.insert(task, row);
        self.names.entry(row).or_insert(comm);
        row
    }
}

/// `stat`'s consumer: histograms per interval, printed each tick.
struct Table<'a> {
    plan: &'a StatPlan,
    out: &'a mut dyn Write,
    total: Stats,
    current: Stats,
    since: Instant,
    /// Each task's row and name, read when its first call arrives (with
    /// `--by` other than syscall).
    tasks: Tasks,
    /// The programs' costs at the last tick (with `--cost`).
    costs: Vec<ProgramCost>,
    /// weft's own CPU time at the last tick, in seconds.
    cpu: f64,
}

impl Consumer for Table<'_> {
    fn take(&mut self, _now: u64, arrival: Arrival<'_>) {
        // stat loads only the syscall probe.
        let Arrival::Syscall(record) = arrival else {
            return;
        };
        let Some(event) = SyscallEvent::read(record) else {
            return;
        };
        let row = match self.plan.by {
            By::Syscall => event.nr,
            by => self.tasks.row(by, &event),
        };
        self.current.record(row, &event);
    }

    fn tick(&mut self, accounting: &Accounting) -> Result<bool> {
        let losses = syscall_losses(accounting);
        let costs = program_costs(accounting, &self.costs);
        let cpu = weft_capture::usage::cpu_seconds();
        let rows = Rows {
            stats: &self.current,
            losses: &losses,
            names: &self.tasks.names,
            costs: &costs,
            cpu: cpu - self.cpu,
        };
        self.cpu = cpu;
        if !emit(self.plan, self.out, "interval", self.since.elapsed(), &rows)? {
            return Ok(false);
        }
        self.costs = syscall_account(accounting).map_or_else(Vec::new, |a| a.costs.clone());
        self.total.merge(&std::mem::take(&mut self.current));
        self.since = Instant::now();
        Ok(true)
    }
}

/// What one table shows.
struct Rows<'a> {
    stats: &'a Stats,
    losses: &'a Losses,
    /// Each row's name, but for syscalls'.
    names: &'a HashMap<u32, String>,
    /// The programs' costs over the table's span (`--cost`), else none.
    costs: &'a [ProgramCost],
    /// weft's own CPU time over the span, in seconds.
    cpu: f64,
}

/// Prints one table or JSON object; returns false when `out` is closed.
fn emit(
    plan: &StatPlan,
    out: &mut dyn Write,
    kind: &str,
    elapsed: Duration,
    table: &Rows<'_>,
) -> Result<bool> {
    let Rows {
        stats,
        losses,
        names,
        costs,
        cpu,
    } = table;
    let cpu_percent = 100.0 * cpu / elapsed.as_secs_f64().max(1e-9);
    let rows = if plan.by == By::Syscall {
        stats.rows(elapsed, syscall_name)
    } else {
        stats.rows(elapsed, |row| names.get(&row).cloned().unwrap_or_default())
    };
    let text = if plan.json {
        let mut object = render_json(kind, elapsed, &rows, losses, plan.by);
        object["weft_cpu_percent"] = json!(cpu_percent);
        object["bpf_ns_per_syscall"] = json!(ProgramCost::per_syscall(costs));
        if plan.cost {
            object["probe_cost"] = cost_json(costs);
            object["probe_cost"]["weft_cpu_percent"] = json!(cpu_percent);
        }
        format!("{object}\n")
    } else {
        let title = format!(
            "== {kind}: {:.3}s, {} syscalls",
            elapsed.as_secs_f64(),
            stats.count()
        );
        let mut text = render_table(&title, &rows, losses, plan.by);
        if plan.cost {
            text.push_str(&cost_line(costs));
        }
        // Always: what tracing costs, beside what it measures: weft's CPU,
        // and its programs' time per syscall (without --cost from the
        // runs sampled with the kernel's statistics on, which cost every
        // BPF program on the machine two clock reads a run).
        // Writing to a String cannot fail.
        let _ = write!(
            text,
            "weft's own CPU: {cpu_percent:.1}% of one CPU (draining, counting, printing)"
        );
        if let Some(ns) = ProgramCost::per_syscall(costs) {
            let sampled = if plan.cost { "" } else { ", sampled 1 s in 10" };
            let _ = write!(text, "; its BPF programs {ns} ns per syscall{sampled}");
        }
        text.push('\n');
        format!("{text}\n")
    };
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("failed to write the table"),
    }
}

/// The syscall probe's counters, the only probe `stat` loads.
fn syscall_losses(accounting: &Accounting) -> Losses {
    syscall_account(accounting)
        .and_then(|account| match &account.losses {
            probe::Losses::Syscalls(losses) => Some(losses.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn syscall_account(accounting: &Accounting) -> Option<&probe::Account> {
    (accounting.0.iter()).find(|a| matches!(a.losses, probe::Losses::Syscalls(_)))
}

/// Each program's runs and time since `before`.
fn program_costs(accounting: &Accounting, before: &[ProgramCost]) -> Vec<ProgramCost> {
    let now = syscall_account(accounting).map_or(&[][..], |a| &a.costs);
    now.iter()
        .map(|cost| {
            let earlier = before.iter().find(|b| b.name == cost.name);
            ProgramCost {
                name: cost.name,
                runs: cost.runs - earlier.map_or(0, |b| b.runs.min(cost.runs)),
                run_ns: cost.run_ns - earlier.map_or(0, |b| b.run_ns.min(cost.run_ns)),
            }
        })
        .collect()
}

/// Nanoseconds per run, 0 without runs.
fn per_run(cost: &ProgramCost) -> f64 {
    cost.run_ns as f64 / cost.runs.max(1) as f64
}

/// The text line for `--cost`: each program's time per run, and their sum
/// per syscall.
fn cost_line(costs: &[ProgramCost]) -> String {
    let parts: Vec<String> = costs
        .iter()
        .map(|c| format!("{} {:.0} ns x {}", c.name, per_run(c), c.runs))
        .collect();
    format!(
        "probe cost (kernel's BPF statistics, which add two clock reads per run): {:.0} ns per syscall; {}\n",
        ProgramCost::per_syscall(costs).unwrap_or(0),
        parts.join(", ")
    )
}

fn cost_json(costs: &[ProgramCost]) -> Value {
    let programs: Vec<Value> = costs
        .iter()
        .map(|c| json!({ "program": c.name, "runs": c.runs, "run_ns": c.run_ns, "ns_per_run": per_run(c) }))
        .collect();
    json!({ "ns_per_syscall": ProgramCost::per_syscall(costs).unwrap_or(0), "programs": programs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_kernel::delivery::Delivery;

    fn event(nr: u32, duration_ns: u64) -> SyscallEvent {
        SyscallEvent {
            nr,
            duration_ns,
            ..SyscallEvent::default()
        }
    }

    #[test]
    fn stats_rows_percentiles_and_order() {
        let mut stats = Stats::default();
        for d in 1..=1000 {
            stats.record(110, &event(110, d * 1000));
        }
        stats.record(0, &event(0, 5));
        let rows = stats.rows(Duration::from_secs(1), syscall_name);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].name.as_str(), rows[0].count), ("getppid", 1000));
        assert_eq!((rows[1].name.as_str(), rows[1].count), ("read", 1));
        // hdrhistogram with 3 significant figures: within 0.1%.
        assert!(
            (rows[0].p50 as f64 - 500_000.0).abs() <= 500.0,
            "p50 {}",
            rows[0].p50
        );
        assert!(
            (rows[0].p99 as f64 - 990_000.0).abs() <= 990.0,
            "p99 {}",
            rows[0].p99
        );
        assert_eq!((rows[0].min, rows[0].max), (1000, 1_000_000));
    }

    #[test]
    fn stats_merge_adds_counts() {
        let (mut a, mut b) = (Stats::default(), Stats::default());
        a.record(1, &event(1, 10));
        b.record(
            1,
            &SyscallEvent {
                ret: -9,
                ..event(1, 20)
            },
        );
        b.record(2, &event(2, 20));
        a.merge(&b);
        assert_eq!(a.count(), 3);
        let rows = a.rows(Duration::from_secs(1), syscall_name);
        assert_eq!((rows[0].count, rows[0].errors), (2, 1));
        assert_eq!((rows[1].count, rows[1].errors), (1, 0));
        assert_eq!(rows[0].top_errno, Some(9));
        assert_eq!(errors_cell(&rows[0]), "1 EBADF");
        assert_eq!(errors_cell(&rows[1]), "0");
    }

    #[test]
    fn syscall_name_unknown_number() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(511), "syscall_511");
    }

    #[test]
    fn tasks_past_the_bound_share_one_row_and_names_share_theirs() {
        let event = |pid: u32, tid: u32| SyscallEvent {
            pid,
            tid,
            ..SyscallEvent::default()
        };
        let mut tasks = Tasks::default();
        let own = std::process::id();
        assert_eq!(tasks.row(By::Pid, &event(own, own)), own);
        // Pids no process has (above pid_max's limit) are rows named `?`.
        for pid in 0..MAX_TASKS as u32 - 1 {
            let pid = (1 << 23) + pid;
            assert_eq!(tasks.row(By::Pid, &event(pid, pid)), pid);
        }
        assert_eq!(tasks.row(By::Pid, &event(7 << 23, 7 << 23)), OTHERS);
        let known = tasks.row(By::Pid, &event(own, own));
        assert_eq!(known, own, "a known process keeps its row");
        assert_eq!(tasks.names.len(), MAX_TASKS + 1);
        assert_eq!(tasks.names[&OTHERS], "(other tasks)");
        assert_eq!(tasks.names[&((1 << 23) + 5)], "?");

        // By name: this process's threads share its name's row; tasks
        // gone share `?`'s.
        let mut tasks = Tasks::default();
        let main = tasks.row(By::Comm, &event(own, own));
        let gone = tasks.row(By::Comm, &event(1 << 23, 1 << 23));
        assert_ne!(main, gone);
        assert_eq!(tasks.row(By::Comm, &event(3 << 23, 3 << 23)), gone);
        assert_eq!(tasks.names.len(), 2);
    }

    #[test]
    fn errno_names_are_glibc_s() {
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(9), "EBADF");
        assert_eq!(errno_name(4000), "E4000");
    }

    #[test]
    fn human_ns_units() {
        assert_eq!(human_ns(999), "999ns");
        assert_eq!(human_ns(1_500), "1.500us");
        assert_eq!(human_ns(2_000_000), "2.000ms");
        assert_eq!(human_ns(3_000_000_000), "3.000s");
    }

    #[test]
    fn render_table_shows_losses_per_cpu() {
        let losses = Losses {
            delivery: Delivery {
                seen: 10,
                received: 7,
                ring_full: 3,
                ring_full_per_cpu: vec![0, 3],
                ring_peak_percent: 100,
                skipped: 2,
            },
            enter_table_full: 0,
            unpaired_exits: 1,
        };
        let text = render_table("t", &[], &losses, By::Syscall);
        // The skipped calls were never seen: lost, but not in `seen`.
        assert!(
            text.contains(
                "lost 5 (ring full 3, enter table full 0, skipped by the kernel 2); received 7 of 10 seen"
            ),
            "{text}"
        );
        assert!(text.contains("ring full by CPU: cpu1 3"), "{text}");
    }
}
