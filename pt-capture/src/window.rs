//! Capturing Intel PT for one short window, as EXIST does: one `intel_pt`
//! event per CPU the target can run on, created disabled, then enabled and
//! disabled with one ioctl each. Per-CPU events rather than per-thread
//! ones, which would reprogram PT at every context switch.
//!
//! [`WindowPlan`] decides the CPUs, the AUX memory per CPU within a budget, and
//! the config fields; [`window`] traces for the planned time under a
//! watchdog thread that disables every event at a hard deadline even if
//! the caller is stuck (and if weft dies, closing the events stops them).
//! [`Traced`] is what `window` needs from an event, so the logic is tested
//! with a fake; [`crate::perf_event::PerfEvent`] is the kernel's.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::caps::Caps;

/// A window is short by design: long enough for a slow request, short
/// enough that the trace stays small and decodable.
pub const DURATIONS: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(2);
/// AUX memory per CPU.
pub const SIZES: std::ops::RangeInclusive<u64> = (4 << 20)..=(128 << 20);
/// How long after the planned end the watchdog disables tracing itself.
pub const GRACE: Duration = Duration::from_millis(250);

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// CPUs the target may run on.
    pub cpus: Vec<u32>,
    pub duration: Duration,
    /// AUX memory per CPU, in bytes.
    pub size: u64,
    /// AUX memory across all CPUs, in bytes.
    pub budget: u64,
    /// Overwrite the oldest data when full, rather than stop.
    pub snapshot: bool,
    /// Trace the kernel too.
    pub kernel: bool,
}

/// What will be opened and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowPlan {
    pub cpus: Vec<u32>,
    /// AUX bytes per CPU: a power of two number of pages.
    pub aux_bytes: u64,
    pub duration: Duration,
    /// When the watchdog disables tracing if the window has not.
    pub deadline: Duration,
    /// `intel_pt` format fields to set, by their sysfs names.
    pub fields: Vec<(&'static str, u64)>,
    pub snapshot: bool,
    pub kernel: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--duration {0:?} is outside 100ms..2s: a PT window is short by design")]
    Duration(Duration),
    #[error("--size {0} bytes per CPU is outside 4MiB..128MiB")]
    Size(u64),
    #[error(
        "{cpus} CPUs need at least {least} bytes of PT buffers, more than the budget of {budget}: \
         narrow the target's CPUs or raise --budget"
    )]
    Budget {
        cpus: usize,
        least: u64,
        budget: u64,
    },
    #[error("the target can run on no CPU")]
    NoCpus,
}

impl WindowPlan {
    pub fn new(caps: &Caps, request: &Request) -> Result<WindowPlan, PlanError> {
        if !DURATIONS.contains(&request.duration) {
            return Err(PlanError::Duration(request.duration));
        }
        if !SIZES.contains(&request.size) {
            return Err(PlanError::Size(request.size));
        }
        let mut cpus = request.cpus.clone();
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err(PlanError::NoCpus);
        }
        // The kernel wants a power of two pages; shrink to fit the budget.
        let mut aux_bytes = 1 << request.size.ilog2();
        while aux_bytes * cpus.len() as u64 > request.budget {
            aux_bytes /= 2;
            if aux_bytes < *SIZES.start() {
                return Err(PlanError::Budget {
                    cpus: cpus.len(),
                    least: SIZES.start() * cpus.len() as u64,
                    budget: request.budget,
                });
            }
        }
        Ok(WindowPlan {
            cpus,
            aux_bytes,
            duration: request.duration,
            deadline: request.duration + GRACE,
            fields: fields(caps),
            snapshot: request.snapshot,
            kernel: request.kernel,
        })
    }
}

/// The config fields this CPU supports: TSC packets always, MTC every 8
/// crystal ticks (or the shortest period offered) for time between them,
/// and CYC where the CPU can, so calls get times between packets.
fn fields(caps: &Caps) -> Vec<(&'static str, u64)> {
    let mut fields = Vec::new();
    let mut set = |name: &'static str, value: u64| {
        if caps.format.contains_key(name) {
            fields.push((name, value));
        }
    };
    set("tsc", 1);
    set("branch", 1);
    if caps.has("mtc") {
        let periods = caps.bitmask("mtc_periods");
        let period = if periods & 1 << 3 != 0 {
            3
        } else {
            u64::from(periods.trailing_zeros()).min(15)
        };
        set("mtc", 1);
        set("mtc_period", period);
    }
    if caps.has("psb_cyc") {
        set("cyc", 1);
    }
    fields
}

/// What [`window`] needs from one CPU's event. `disable` may be called
/// from the watchdog thread while the window's thread is stuck.
pub trait Traced: Send + Sync {
    fn enable(&self) -> io::Result<()>;
    fn disable(&self) -> io::Result<()>;
    /// The trace in the AUX area, after tracing stopped.
    fn take(&self) -> io::Result<Aux>;
}

/// One CPU's trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aux {
    pub bytes: Vec<u8>,
    /// The buffer filled and the CPU stopped writing (full mode), or
    /// overwrote older data (snapshot mode): the kernel said so.
    pub truncated: bool,
}

/// A finished window.
#[derive(Debug)]
pub struct Window {
    pub traces: Vec<(u32, Aux)>,
    /// The watchdog had to disable tracing: the caller overran the
    /// deadline.
    pub watchdog: bool,
    /// From enabling the first event to disabling the last.
    pub traced_for: Duration,
}

/// Trace for `plan.duration`: enable every event, let `wait` pass the time
/// (normally a sleep), disable every event, collect their traces. Each
/// event is enabled and disabled exactly once, by this thread or by the
/// watchdog at `plan.deadline`, whichever comes first.
pub fn window<E: Traced + 'static>(
    plan: &WindowPlan,
    events: Vec<(u32, E)>,
    wait: impl FnOnce(Duration),
) -> io::Result<Window> {
    let events = Arc::new(events);
    let off = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    for (i, (_, event)) in events.iter().enumerate() {
        if let Err(err) = event.enable() {
            off.store(true, Ordering::SeqCst);
            // The enable error is the one to report.
            let _ = disable(&events[..i]);
            return Err(err);
        }
    }
    let (stop, stopped) = mpsc::channel::<()>();
    let watchdog = {
        let (events, off, deadline) = (Arc::clone(&events), Arc::clone(&off), plan.deadline);
        std::thread::spawn(move || {
            let overran = matches!(
                stopped.recv_timeout(deadline.saturating_sub(start.elapsed())),
                Err(mpsc::RecvTimeoutError::Timeout)
            );
            (overran && !off.swap(true, Ordering::SeqCst)).then(|| disable(&events))
        })
    };
    wait(plan.duration);
    let result = if off.swap(true, Ordering::SeqCst) {
        Ok(())
    } else {
        disable(&events)
    };
    let traced_for = start.elapsed();
    drop(stop);
    let fired = watchdog
        .join()
        .map_err(|_| io::Error::other("the PT watchdog panicked"))?;
    result?;
    let watchdog = match fired {
        Some(Err(err)) => return Err(err),
        Some(Ok(())) => true,
        None => false,
    };
    let traces = events
        .iter()
        .map(|(cpu, event)| Ok((*cpu, event.take()?)))
        .collect::<io::Result<_>>()?;
    Ok(Window {
        traces,
        watchdog,
        traced_for,
    })
}

/// Disable every event, even after one fails; the first error.
fn disable<E: Traced>(events: &[(u32, E)]) -> io::Result<()> {
    let mut first = Ok(());
    for (_, event) in events {
        if let Err(err) = event.disable()
            && first.is_ok()
        {
            first = Err(err);
        }
    }
    first
}

/// A TSC reading and the `CLOCK_MONOTONIC` ns of the same instant, taken
/// as the middle of the tightest of a few pairs of clock reads around an
/// `rdtsc`; `None` off x86-64.
pub fn read_tsc_and_monotonic() -> Option<(u64, u64)> {
    #[cfg(target_arch = "x86_64")]
    {
        let monotonic = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec to write.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
            u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000
                + u64::try_from(ts.tv_nsec).unwrap_or(0)
        };
        (0..8)
            .map(|_| {
                let before = monotonic();
                // SAFETY: rdtsc has no preconditions.
                let tsc = unsafe { std::arch::x86_64::_rdtsc() };
                let after = monotonic();
                (after - before, tsc, before + (after - before) / 2)
            })
            .min()
            .map(|(_, tsc, ns)| (tsc, ns))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn caps(caps: &[(&str, &str)], format: &[&str]) -> Caps {
        Caps {
            pmu_type: 8,
            caps: caps
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            format: format
                .iter()
                .map(|k| ((*k).into(), "config:0".into()))
                .collect(),
        }
    }

    fn request(cpus: &[u32]) -> Request {
        Request {
            cpus: cpus.to_vec(),
            duration: Duration::from_millis(100),
            size: 16 << 20,
            budget: 256 << 20,
            snapshot: false,
            kernel: false,
        }
    }

    #[test]
    fn the_plan_fits_the_buffers_in_the_budget_or_says_why_not() {
        let caps = caps(&[], &["tsc"]);
        let plan = WindowPlan::new(&caps, &request(&[3, 1, 3, 2])).unwrap();
        assert_eq!(plan.cpus, [1, 2, 3]);
        assert_eq!(plan.aux_bytes, 16 << 20);
        assert_eq!(plan.deadline, Duration::from_millis(350));
        // 20 MiB rounds down to 16 MiB (a power of two pages).
        let plan = WindowPlan::new(
            &caps,
            &Request {
                size: 20 << 20,
                ..request(&[0])
            },
        )
        .unwrap();
        assert_eq!(plan.aux_bytes, 16 << 20);
        // 32 CPUs x 16 MiB exceed 256 MiB: 8 MiB each fits.
        let many: Vec<u32> = (0..32).collect();
        let plan = WindowPlan::new(&caps, &request(&many)).unwrap();
        assert_eq!(plan.aux_bytes, 8 << 20);
        // 128 CPUs x 4 MiB do not.
        let all: Vec<u32> = (0..128).collect();
        let err = WindowPlan::new(&caps, &request(&all)).unwrap_err();
        assert_eq!(
            err,
            PlanError::Budget {
                cpus: 128,
                least: 512 << 20,
                budget: 256 << 20
            }
        );
        assert!(err.to_string().contains("raise --budget"), "{err}");
        for (bad, want) in [
            (
                Request {
                    duration: Duration::from_millis(50),
                    ..request(&[0])
                },
                "outside 100ms..2s",
            ),
            (
                Request {
                    duration: Duration::from_secs(3),
                    ..request(&[0])
                },
                "outside 100ms..2s",
            ),
            (
                Request {
                    size: 1 << 20,
                    ..request(&[0])
                },
                "outside 4MiB..128MiB",
            ),
            (request(&[]), "no CPU"),
        ] {
            let err = WindowPlan::new(&caps, &bad).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn the_config_asks_only_for_what_the_cpu_offers() {
        let all = ["tsc", "branch", "mtc", "mtc_period", "cyc"];
        let full = caps(
            &[("mtc", "1"), ("mtc_periods", "249"), ("psb_cyc", "1")],
            &all,
        );
        assert_eq!(
            fields(&full),
            [
                ("tsc", 1),
                ("branch", 1),
                ("mtc", 1),
                ("mtc_period", 3),
                ("cyc", 1)
            ]
        );
        // mtc_periods is a hex bitmask: 0x240 offers periods 6 and 9 only.
        let odd = caps(&[("mtc", "1"), ("mtc_periods", "240")], &all);
        assert_eq!(fields(&odd)[3], ("mtc_period", 6));
        let bare = caps(&[("mtc", "0")], &["tsc"]);
        assert_eq!(fields(&bare), [("tsc", 1)]);
    }

    /// An event that logs what is done to it, and when.
    #[derive(Default)]
    struct Fake {
        log: Mutex<Vec<(&'static str, Instant)>>,
        fail_enable: bool,
    }

    impl Traced for Arc<Fake> {
        fn enable(&self) -> io::Result<()> {
            if self.fail_enable {
                return Err(io::Error::other("no PT here"));
            }
            self.log.lock().unwrap().push(("enable", Instant::now()));
            Ok(())
        }

        fn disable(&self) -> io::Result<()> {
            self.log.lock().unwrap().push(("disable", Instant::now()));
            Ok(())
        }

        fn take(&self) -> io::Result<Aux> {
            Ok(Aux {
                bytes: vec![2, 0x82],
                truncated: false,
            })
        }
    }

    fn plan(cpus: &[u32]) -> WindowPlan {
        WindowPlan::new(&caps(&[], &["tsc"]), &request(cpus)).unwrap()
    }

    fn ops(fake: &Fake) -> Vec<&'static str> {
        fake.log.lock().unwrap().iter().map(|(op, _)| *op).collect()
    }

    #[test]
    fn each_event_is_enabled_and_disabled_once_per_window() {
        let fakes: Vec<Arc<Fake>> = (0..3).map(|_| Arc::default()).collect();
        let events = (0..3).zip(fakes.iter().cloned()).collect();
        let window = window(&plan(&[0, 1, 2]), events, std::thread::sleep).unwrap();
        assert!(!window.watchdog);
        assert!(window.traced_for >= Duration::from_millis(100));
        assert_eq!(window.traces.len(), 3);
        for fake in &fakes {
            assert_eq!(ops(fake), ["enable", "disable"]);
        }
    }

    #[test]
    fn the_watchdog_stops_tracing_at_the_deadline_when_the_caller_is_stuck() {
        let fake = Arc::new(Fake::default());
        let stuck = |_| std::thread::sleep(Duration::from_millis(900));
        let start = Instant::now();
        let window = window(&plan(&[0]), vec![(0, Arc::clone(&fake))], stuck).unwrap();
        assert!(window.watchdog);
        assert_eq!(ops(&fake), ["enable", "disable"]);
        let log = fake.log.lock().unwrap();
        let off_after = log[1].1 - start;
        // Disabled by the watchdog at 350 ms, not by the caller at 900 ms.
        assert!(off_after >= Duration::from_millis(350), "{off_after:?}");
        assert!(off_after < Duration::from_millis(800), "{off_after:?}");
    }

    #[test]
    fn a_failed_enable_disables_the_events_already_on() {
        let on = Arc::new(Fake::default());
        let broken = Arc::new(Fake {
            fail_enable: true,
            ..Fake::default()
        });
        let events = vec![(0, Arc::clone(&on)), (1, Arc::clone(&broken))];
        let err = window(&plan(&[0, 1]), events, std::thread::sleep).unwrap_err();
        assert_eq!(err.to_string(), "no PT here");
        assert_eq!(ops(&on), ["enable", "disable"]);
        assert!(ops(&broken).is_empty());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_tsc_read_now_converts_to_the_monotonic_clock_now() {
        use weft_pt::time::TscClock;
        let first = read_tsc_and_monotonic().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let last = read_tsc_and_monotonic().unwrap();
        let clock = TscClock {
            tsc: [first.0, last.0],
            ns: [first.1, last.1],
        };
        std::thread::sleep(Duration::from_millis(20));
        let (tsc, ns) = read_tsc_and_monotonic().unwrap();
        // 20 ms past the last reading, the line is still within 0.1 ms
        // (a VM's vCPU may be descheduled between the reads).
        let error = clock.ns(tsc).abs_diff(ns);
        assert!(error < 100_000, "{error} ns off");
    }
}
