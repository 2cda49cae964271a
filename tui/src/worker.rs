//! The query thread: answers the UI's jobs off the drawing thread, and
//! skips refreshes that a newer one has replaced while it was busy.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{self, Receiver, Sender},
    },
    time::{Duration, Instant},
};

use weft_query::{Answer, feed::Feed};

use crate::state::Job;

enum Message {
    /// The refresh queries; a newer batch replaces an unstarted one.
    Refresh(Vec<Job>),
    /// A query the user asked: always answered.
    Ask(Job),
}

pub struct Worker {
    jobs: Sender<Message>,
    answers: Receiver<(Job, Result<Answer, String>)>,
    /// How long the last refresh took to answer, in ns.
    refresh_ns: Arc<AtomicU64>,
    /// A refresh is asked for and not yet answered.
    refreshing: Arc<AtomicBool>,
    /// When the last refresh was answered, in ns since `start`.
    finished_ns: Arc<AtomicU64>,
    start: Instant,
}

impl Worker {
    pub fn spawn(feed: Arc<dyn Feed>) -> io::Result<Self> {
        let (jobs, inbox) = mpsc::channel();
        let (outbox, answers) = mpsc::channel();
        let refresh_ns = Arc::new(AtomicU64::new(0));
        let refreshing = Arc::new(AtomicBool::new(false));
        let finished_ns = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let state = Refresh {
            took_ns: Arc::clone(&refresh_ns),
            running: Arc::clone(&refreshing),
            finished_ns: Arc::clone(&finished_ns),
            start,
        };
        std::thread::Builder::new()
            .name("weft-tui-query".into())
            .spawn(move || serve(feed.as_ref(), &inbox, &outbox, &state))?;
        Ok(Self {
            jobs,
            answers,
            refresh_ns,
            refreshing,
            finished_ns,
            start,
        })
    }

    /// Whether the last refresh is answered and the worker has rested
    /// `factor` times as long as it took since.
    pub fn rested(&self, factor: u32) -> bool {
        let finished = Duration::from_nanos(self.finished_ns.load(Ordering::Relaxed));
        !self.refreshing.load(Ordering::Relaxed)
            && self.start.elapsed() >= finished + self.refresh_cost() * factor
    }

    /// How long the last refresh's queries took.
    pub fn refresh_cost(&self) -> Duration {
        Duration::from_nanos(self.refresh_ns.load(Ordering::Relaxed))
    }

    pub fn refresh(&self, jobs: Vec<Job>) {
        self.refreshing.store(true, Ordering::Relaxed);
        // The worker ends only when this sender is dropped.
        let _ = self.jobs.send(Message::Refresh(jobs));
    }

    pub fn ask(&self, job: Job) {
        let _ = self.jobs.send(Message::Ask(job));
    }

    /// The answers that arrived since the last call.
    pub fn answers(&self) -> Vec<(Job, Result<Answer, String>)> {
        self.answers.try_iter().collect()
    }
}

/// What the worker tells about its refreshes.
struct Refresh {
    took_ns: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
    finished_ns: Arc<AtomicU64>,
    start: Instant,
}

fn serve(
    feed: &dyn Feed,
    inbox: &Receiver<Message>,
    outbox: &Sender<(Job, Result<Answer, String>)>,
    state: &Refresh,
) {
    // The lowest CPU priority, for this thread and the decoding threads it
    // starts: the capture's thread and the traced programs come first.
    // SAFETY: setpriority on the calling thread (Linux: `who` 0 with
    // PRIO_PROCESS is the caller) has no memory effects.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    while let Ok(first) = inbox.recv() {
        let mut asked = Vec::new();
        let mut refresh = None;
        for message in std::iter::once(first).chain(inbox.try_iter()) {
            match message {
                Message::Ask(job) => asked.push(job),
                Message::Refresh(jobs) => refresh = Some(jobs),
            }
        }
        for job in asked {
            if outbox.send((job.clone(), feed.ask(job.query()))).is_err() {
                return;
            }
        }
        let started = Instant::now();
        for job in refresh.iter().flatten() {
            if outbox.send((job.clone(), feed.ask(job.query()))).is_err() {
                return;
            }
        }
        if refresh.is_some() {
            let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            state
                .took_ns
                .store(ns(started.elapsed()), Ordering::Relaxed);
            state
                .finished_ns
                .store(ns(state.start.elapsed()), Ordering::Relaxed);
            state.running.store(false, Ordering::Relaxed);
        }
    }
}
