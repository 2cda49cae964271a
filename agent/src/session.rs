//! The capture loop shared by `stat` and `record`: drain every ring on a
//! timer, give the consumer a tick now and then, stop at the deadline, on
//! SIGINT or on SIGTERM, then detach and drain what is left so that the
//! final counts are exact.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use weft_probes::syscall::SyscallEvent;

use crate::syscall::{Counters, Losses, SyscallProbe};

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
}

/// What a capture does with its events.
pub trait Consumer {
    fn event(&mut self, event: &SyscallEvent);

    /// Called every tick with the current counters and records received so
    /// far; `Ok(false)` stops the capture.
    fn tick(&mut self, counters: &Counters, received: u64) -> Result<bool>;
}

/// How a capture ended.
pub struct Outcome {
    /// Records drained, all told.
    pub received: u64,
    /// Time from start to the stop request (detaching is not counted).
    pub elapsed: Duration,
    /// The probe's counters after the final drain.
    pub counters: Counters,
}

/// Runs a capture to its end and checks that every record is accounted for.
pub fn run(
    session: &Session,
    probe: &mut SyscallProbe,
    consumer: &mut impl Consumer,
) -> Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let start = Instant::now();
    let mut received = runtime.block_on(capture(session, probe, consumer))?;
    let elapsed = start.elapsed();
    probe.detach()?;
    received += probe.drain(|e| consumer.event(e));
    let counters = probe.counters()?;
    let losses = Losses::new(&counters, received);
    if !losses.balanced() || probe.malformed() > 0 {
        eprintln!(
            "weft: accounting mismatch: received {received} + ring full {} != seen {} ({} malformed records)",
            losses.ring_full,
            losses.seen,
            probe.malformed()
        );
    }
    Ok(Outcome {
        received,
        elapsed,
        counters,
    })
}

/// The loop until a stop request; returns the records received.
async fn capture(
    session: &Session,
    probe: &mut SyscallProbe,
    consumer: &mut impl Consumer,
) -> Result<u64> {
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
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to handle SIGTERM")?;
    eprintln!("{}", session.ready);
    let mut received = 0;
    loop {
        tokio::select! {
            _ = drain.tick() => received += probe.drain(|e| consumer.event(e)),
            _ = tick.tick(), if session.tick.is_some() => {
                received += probe.drain(|e| consumer.event(e));
                if !consumer.tick(&probe.counters()?, received)? {
                    break;
                }
            }
            () = &mut deadline => break,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }
    Ok(received)
}
