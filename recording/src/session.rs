//! The capture loop shared by `stat` and `record`: drain every ring on a
//! timer, give the consumer a tick now and then, stop at the deadline, on
//! SIGINT or on SIGTERM, then detach and drain what is left so that the
//! final counts are exact.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use tokio::sync::Notify;
use weft_kernel::{
    events::{EventProbe, SourceLosses},
    source::SourceHooks,
    syscall::{Losses, SyscallProbe},
};

use crate::app::{AppLosses, AppServer, Message};

/// When to drain, tick and stop.
pub struct Session {
    pub drain_interval: Duration,
    /// How often [`Consumer::tick`] runs; `None` never.
    pub tick: Option<Duration>,
    /// Stop after this long; `None` runs until a signal.
    pub duration: Option<Duration>,
    /// Printed to stderr once signals are handled, so that whoever waits
    /// for it may send SIGINT right away.
    pub ready: String,
    /// Stops the capture as a signal would (the terminal UI's quit).
    pub stop: Option<Arc<Notify>>,
}

/// One record as its probe delivered it.
pub enum Arrival<'a> {
    /// A syscall record as it lies in the ring (a `SyscallEvent`'s bytes,
    /// at least `EVENT_SIZE` of them).
    Syscall(&'a [u8]),
    /// A record of another source: the kernel record, header included.
    Event(&'static SourceHooks, &'a [u8]),
    /// A source or record pushed by an application.
    App(Message),
}

/// What a capture does with its records: one sink for every probe.
pub trait Consumer {
    /// A record drained at `now` (`CLOCK_MONOTONIC` ns).
    fn take(&mut self, now: u64, arrival: Arrival<'_>);

    /// SIGUSR2: keep the window around now (`record`'s manual trigger).
    fn manual_trigger(&mut self) {}

    /// Called every tick with what was received and lost so far;
    /// `Ok(false)` stops the capture.
    fn tick(&mut self, accounting: &Accounting) -> Result<bool>;
}

/// The probes of one capture: syscalls, other sources, or both.
pub struct Probes {
    pub syscalls: Option<SyscallProbe>,
    pub events: Option<EventProbe>,
    pub app: Option<AppServer>,
    /// Syscall records drained so far.
    syscalls_received: u64,
    /// Application records drained so far.
    app_received: u64,
}

/// What each probe received and lost.
#[derive(Clone, Default)]
pub struct Accounting {
    pub syscalls: Option<Losses>,
    pub sources: Vec<(&'static SourceHooks, SourceLosses)>,
    pub app: Option<AppLosses>,
}

impl Accounting {
    /// Records received, all sources told.
    pub fn received(&self) -> u64 {
        self.syscalls.as_ref().map_or(0, |l| l.delivery.received)
            + self
                .sources
                .iter()
                .map(|(_, l)| l.delivery.received)
                .sum::<u64>()
            + self.app.map_or(0, |l| l.received)
    }

    /// Records lost, all sources told.
    pub fn lost(&self) -> u64 {
        self.syscalls.as_ref().map_or(0, Losses::lost)
            + self.sources.iter().map(|(_, l)| l.lost()).sum::<u64>()
    }
}

impl Probes {
    pub fn new(
        syscalls: Option<SyscallProbe>,
        events: Option<EventProbe>,
        app: Option<AppServer>,
    ) -> Self {
        Self {
            syscalls,
            events,
            app,
            syscalls_received: 0,
            app_received: 0,
        }
    }

    /// Drains a bounded batch of every ring; returns whether records were
    /// left behind (to drain again at once).
    fn drain(&mut self, consumer: &mut impl Consumer) -> bool {
        let mut more = false;
        if let Some(probe) = &mut self.syscalls {
            let drained = probe.drain(|now, record| consumer.take(now, Arrival::Syscall(record)));
            self.syscalls_received += drained.records;
            more |= drained.more;
        }
        if let Some(probe) = &mut self.events {
            more |= probe
                .drain(|hooks, now, record| consumer.take(now, Arrival::Event(hooks, record)))
                .more;
        }
        if let Some(server) = &self.app {
            self.app_received += server.drain(|message| {
                consumer.take(weft_store::now_ns(), Arrival::App(message));
            });
        }
        more
    }

    /// Reads every probe's counters.
    pub fn accounting(&self) -> Result<Accounting> {
        Ok(Accounting {
            syscalls: match &self.syscalls {
                Some(probe) => Some(Losses::new(&probe.counters()?, self.syscalls_received)),
                None => None,
            },
            sources: match &self.events {
                Some(probe) => probe.losses()?,
                None => Vec::new(),
            },
            app: self.app.as_ref().map(|server| AppLosses {
                received: self.app_received,
                rejected: server.rejected(),
            }),
        })
    }

    fn attach_new_interfaces(&mut self) {
        if let Some(probe) = &mut self.events {
            probe.attach_new_interfaces();
        }
    }

    fn detach(&mut self) -> Result<()> {
        if let Some(probe) = &mut self.syscalls {
            probe.detach()?;
        }
        if let Some(probe) = &mut self.events {
            probe.detach();
        }
        Ok(())
    }

    fn malformed(&self) -> u64 {
        self.syscalls.as_ref().map_or(0, SyscallProbe::malformed)
            + self.events.as_ref().map_or(0, EventProbe::malformed)
    }
}

/// How a capture ended.
pub struct Outcome {
    /// Time from start to the stop request (detaching is not counted).
    pub elapsed: Duration,
    /// What was received and lost, after the final drain.
    pub accounting: Accounting,
}

/// Runs a capture to its end and checks that every record is accounted for.
pub fn run(
    session: &Session,
    probes: &mut Probes,
    consumer: &mut impl Consumer,
) -> Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let start = Instant::now();
    runtime.block_on(capture(session, probes, consumer))?;
    let elapsed = start.elapsed();
    probes.detach()?;
    while probes.drain(consumer) {}
    let accounting = probes.accounting()?;
    report_mismatches(&accounting, probes.malformed());
    Ok(Outcome {
        elapsed,
        accounting,
    })
}

/// Says so when records are unaccounted for: never expected.
fn report_mismatches(accounting: &Accounting, malformed: u64) {
    if let Some(losses) = &accounting.syscalls {
        losses.delivery.report_mismatch("syscalls");
    }
    for (spec, losses) in &accounting.sources {
        losses.delivery.report_mismatch(spec.name);
    }
    if malformed > 0 {
        eprintln!("weft: {malformed} malformed records");
    }
}

/// The loop until a stop request.
async fn capture(
    session: &Session,
    probes: &mut Probes,
    consumer: &mut impl Consumer,
) -> Result<()> {
    use tokio::{
        signal::unix::{SignalKind, signal},
        time::{MissedTickBehavior, interval, sleep},
    };
    let mut drain = interval(session.drain_interval);
    drain.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tick = interval(session.tick.unwrap_or(Duration::from_secs(3600)));
    tick.tick().await;
    let deadline = sleep(
        session
            .duration
            .unwrap_or(Duration::from_secs(u64::MAX / 4)),
    );
    tokio::pin!(deadline);
    // Network interfaces that come up are attached to within a second.
    let mut interfaces = interval(Duration::from_secs(1));
    interfaces.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to handle SIGTERM")?;
    let mut user2 = signal(SignalKind::user_defined2()).context("failed to handle SIGUSR2")?;
    let stop = session.stop.clone().unwrap_or_default();
    eprintln!("{}", session.ready);
    loop {
        tokio::select! {
            _ = drain.tick() => {
                if probes.drain(consumer) {
                    // Behind: the next batch at once, after the other
                    // branches had their turn.
                    drain.reset_immediately();
                }
            }
            _ = tick.tick(), if session.tick.is_some() => {
                probes.drain(consumer);
                if !consumer.tick(&probes.accounting()?)? {
                    break;
                }
            }
            _ = interfaces.tick() => probes.attach_new_interfaces(),
            () = &mut deadline => break,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            () = stop.notified() => break,
            _ = user2.recv() => {
                probes.drain(consumer);
                consumer.manual_trigger();
            }
        }
    }
    Ok(())
}
