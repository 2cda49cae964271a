//! weft's terminal UI (`sudo weft`, `weft tui DIR`): an overview of every
//! source, per-syscall latency percentiles over a sliding window, and a
//! query bar, on a live capture or a recording alike ([`Feed`]).
//!
//! Depends on `weft-query` only, and on the [`Feed`] its caller implements: never
//! on the store's writer, eBPF or the command line.
//!
//! State ([`state`]) and drawing ([`draw`]) are separate: the state changes
//! on key presses and answers and is tested without a terminal; drawing is
//! a pure function of it. Queries run on a worker thread, so a slow query
//! never stalls a frame, and the UI never runs on the capture's thread.

pub mod draw;
mod heatmap;
mod input;
pub mod state;
#[cfg(test)]
mod tests;
pub mod timeline;
mod worker;

use std::{
    io,
    sync::Arc,
    time::{Duration, Instant},
};

use ratatui::crossterm::{
    event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind},
    execute,
};
use weft_query::feed::Feed;

pub use crate::state::State;
use crate::{state::Effect, worker::Worker};

/// How often a live UI asks for new numbers.
const REFRESH: Duration = Duration::from_secs(1);

/// How often a due refresh looks again whether the worker has rested.
const RESTING: Duration = Duration::from_millis(20);

/// Runs the UI on this terminal until the user quits, then restores it;
/// returns how long the frames took to draw.
pub fn run(feed: &Arc<dyn Feed>) -> io::Result<FrameTimes> {
    let mut terminal = ratatui::try_init()?;
    // Mouse capture is a nicety: a terminal without it still works.
    let _ = execute!(io::stdout(), EnableMouseCapture);
    let mut frames = FrameTimes::default();
    let result = event_loop(&mut terminal, feed, &mut frames);
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result.map(|()| frames)
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    feed: &Arc<dyn Feed>,
    frames: &mut FrameTimes,
) -> io::Result<()> {
    let worker = Worker::spawn(Arc::clone(feed))?;
    let mut state = State::new(feed.as_ref());
    let start = Instant::now();
    // Counters are taken every second, and the queries asked again, once
    // the last ones are answered and the worker has rested three times
    // what they took: on a busy host they scan millions of records on
    // every core (at the lowest priority), and the capture and the traced
    // programs share those cores. A recording changes only when the user
    // moves in it.
    let (mut next_tick, mut next_refresh) = (start, start);
    let period = if feed.range().is_none() {
        REFRESH
    } else {
        Duration::MAX / 4
    };
    // Draw only when something changed: an idle UI costs nothing.
    let mut changed = true;
    loop {
        let now = Instant::now();
        if now >= next_tick {
            let health = feed.health();
            if health.ended {
                return Ok(());
            }
            if !state.frozen {
                state.apply_health(health, start.elapsed().as_secs_f64());
                changed = true;
            }
            next_tick = now + period;
        }
        if now >= next_refresh {
            // Not rested yet: look again shortly rather than spin on a
            // deadline already past (the spin cost a quarter of a core).
            next_refresh = now + RESTING;
            if worker.rested(3) {
                if !state.frozen {
                    worker.refresh(state.refresh_jobs());
                }
                next_refresh = now + period;
            }
        }
        for (job, answer) in worker.answers() {
            let effect = state.apply(job, answer);
            follow(effect, &mut state, &worker, feed.as_ref());
            changed = true;
        }
        if changed {
            let started = Instant::now();
            terminal.draw(|frame| draw::draw(frame, &state))?;
            frames.add(started.elapsed());
            changed = false;
        }
        let wait = next_tick
            .min(next_refresh)
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        if !event::poll(wait)? {
            continue;
        }
        changed = true;
        let effect = match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => state.key(key),
            Event::Mouse(mouse) => state.mouse(mouse),
            _ => Effect::None,
        };
        follow(effect, &mut state, &worker, feed.as_ref());
        if state.quit {
            return Ok(());
        }
    }
}

/// Carries out what a key press or an answer calls for.
fn follow(effect: Effect, state: &mut State, worker: &Worker, feed: &dyn Feed) {
    match effect {
        Effect::None => {}
        Effect::Refresh => worker.refresh(state.refresh_jobs()),
        Effect::Run(job) => worker.ask(job),
        Effect::CapturePt(pid) => {
            state.message = feed.capture_pt(pid).unwrap_or_else(|why| why);
        }
    }
}

/// Frame draw times in 0.1 ms buckets up to 100 ms, in fixed memory.
#[derive(Clone, Debug)]
pub struct FrameTimes {
    buckets: Vec<u64>,
    pub count: u64,
    pub max: Duration,
}

impl Default for FrameTimes {
    fn default() -> Self {
        Self {
            buckets: vec![0; 1001],
            count: 0,
            max: Duration::ZERO,
        }
    }
}

impl FrameTimes {
    const BUCKET: Duration = Duration::from_micros(100);

    pub fn add(&mut self, took: Duration) {
        let bucket = (took.as_micros() / Self::BUCKET.as_micros()).min(1000);
        self.buckets[bucket as usize] += 1;
        self.count += 1;
        self.max = self.max.max(took);
    }

    /// The median, to the 0.1 ms bucket's upper edge (`max` past 100 ms).
    pub fn median(&self) -> Duration {
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen * 2 >= self.count && self.count > 0 {
                return if i == 1000 {
                    self.max
                } else {
                    Self::BUCKET * (i as u32 + 1)
                };
            }
        }
        Duration::ZERO
    }
}
