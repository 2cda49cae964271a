//! The capture loop shared by `stat` and `record`: drain every ring on a
//! timer, give the consumer a tick now and then, stop at the deadline, on
//! SIGINT or on SIGTERM, then detach and drain what is left so that the
//! final counts are exact.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result};
use crate::probe::{Accounting, Consumer, Probes};
use tokio::sync::Notify;

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
    /// Wakes the consumer for work another thread handed it (a peer's
    /// request to keep a window): [`Consumer::poke`] runs at once.
    pub poke: Option<Arc<Notify>>,
}

/// Drains a bounded batch of every probe; returns whether records were
/// left behind (to drain again at once).
fn drain_all(probes: &mut Probes, consumer: &mut dyn Consumer) -> bool {
    let mut more = false;
    for probe in probes {
        more |= probe.drain(consumer);
    }
    more
}

/// How a capture ended.
pub struct Outcome {
    /// Time from start to the stop request (detaching is not counted).
    pub elapsed: Duration,
    /// What was received and lost, after the final drain.
    pub accounting: Accounting,
}

/// Runs a capture to its end and checks that every record is accounted for.
pub fn run(session: &Session, probes: &mut Probes, consumer: &mut dyn Consumer) -> Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let start = Instant::now();
    runtime.block_on(capture(session, probes, consumer))?;
    let elapsed = start.elapsed();
    for probe in probes.iter_mut() {
        probe.detach()?;
    }
    while drain_all(probes, consumer) {}
    let accounting = Accounting::of(probes)?;
    report_mismatches(&accounting, probes.iter().map(|p| p.malformed()).sum());
    Ok(Outcome {
        elapsed,
        accounting,
    })
}

/// Says so when records are unaccounted for: never expected.
fn report_mismatches(accounting: &Accounting, malformed: u64) {
    for account in &accounting.0 {
        if let Some(delivery) = account.delivery() {
            delivery.report_mismatch(account.name);
        }
    }
    if malformed > 0 {
        log::warn!("weft: {malformed} malformed records");
    }
}

/// The loop until a stop request.
async fn capture(
    session: &Session,
    probes: &mut Probes,
    consumer: &mut dyn Consumer,
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
    // Probes look again every second (network interfaces that come up are
    // attached to within a second).
    let mut refresh = interval(Duration::from_secs(1));
    refresh.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to handle SIGTERM")?;
    // A closed terminal ends the recording cleanly too: the capture closes
    // and a temporary one is removed, where the default would kill weft.
    let mut hangup = signal(SignalKind::hangup()).context("failed to handle SIGHUP")?;
    let mut user2 = signal(SignalKind::user_defined2()).context("failed to handle SIGUSR2")?;
    let stop = session.stop.clone().unwrap_or_default();
    let poke = session.poke.clone().unwrap_or_default();
    log::info!("{}", session.ready);
    loop {
        tokio::select! {
            _ = drain.tick() => {
                let behind = drain_all(probes, consumer);
                consumer.drained();
                if behind {
                    // Behind: the next batch at once, after the other
                    // branches had their turn.
                    drain.reset_immediately();
                }
            }
            _ = tick.tick(), if session.tick.is_some() => {
                drain_all(probes, consumer);
                if !consumer.tick(&Accounting::of(probes)?)? {
                    break;
                }
            }
            _ = refresh.tick() => probes.iter_mut().for_each(|p| p.refresh()),
            () = &mut deadline => break,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => break,
            () = stop.notified() => break,
            () = poke.notified() => {
                drain_all(probes, consumer);
                consumer.poke();
            }
            _ = user2.recv() => {
                drain_all(probes, consumer);
                consumer.manual_trigger();
            }
        }
    }
    Ok(())
}
