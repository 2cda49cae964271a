//! weft's terminal UI (`sudo weft`, `weft tui DIR`): an overview of every
//! source, per-syscall latency percentiles over a sliding window, and a
//! query bar, on a live capture or a recording alike ([`Feed`]).
//!
//! State ([`app`]) and drawing ([`draw`]) are separate: the state changes
//! on key presses and answers and is tested without a terminal; drawing is
//! a pure function of it. Queries run on a worker thread, so a slow query
//! never stalls a frame, and the UI never runs on the capture's thread.

pub mod app;
pub mod draw;
mod feed;
mod input;
#[cfg(test)]
mod tests;
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

pub use crate::{
    app::App,
    feed::{Feed, Health, SourceHealth},
};
use crate::{app::Effect, worker::Worker};

/// How often a live UI asks for new numbers.
const REFRESH: Duration = Duration::from_secs(1);

/// Runs the UI on this terminal until the user quits, then restores it.
pub fn run(feed: &Arc<dyn Feed>) -> io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    // Mouse capture is a nicety: a terminal without it still works.
    let _ = execute!(io::stdout(), EnableMouseCapture);
    let result = event_loop(&mut terminal, feed);
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result
}

fn event_loop(terminal: &mut ratatui::DefaultTerminal, feed: &Arc<dyn Feed>) -> io::Result<()> {
    let worker = Worker::spawn(Arc::clone(feed))?;
    let mut app = App::new(feed.as_ref());
    let start = Instant::now();
    let mut next_refresh = start;
    loop {
        let now = Instant::now();
        if now >= next_refresh {
            let health = feed.health();
            if health.ended {
                return Ok(());
            }
            if !app.frozen {
                app.apply_health(health, start.elapsed().as_secs_f64());
                worker.refresh(app.refresh_jobs());
            }
            // A recording changes only when the user moves in it.
            next_refresh = now
                + if app.live() {
                    REFRESH
                } else {
                    Duration::MAX / 4
                };
        }
        for (job, answer) in worker.answers() {
            app.apply(job, answer);
        }
        terminal.draw(|frame| draw::draw(frame, &app))?;
        let wait = next_refresh
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if !event::poll(wait)? {
            continue;
        }
        let effect = match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => app.key(key),
            Event::Mouse(mouse) => app.mouse(mouse),
            _ => Effect::None,
        };
        match effect {
            Effect::None => {}
            Effect::Refresh => worker.refresh(app.refresh_jobs()),
            Effect::Run(job) => worker.ask(job),
        }
        if app.quit {
            return Ok(());
        }
    }
}
