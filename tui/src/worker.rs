//! The query thread: answers the UI's jobs off the drawing thread, and
//! skips refreshes that a newer one has replaced while it was busy.

use std::{
    io,
    sync::{
        Arc,
        mpsc::{self, Receiver, Sender},
    },
};

use weft_query::Answer;

use crate::{Feed, app::Job};

enum Message {
    /// The refresh queries; a newer batch replaces an unstarted one.
    Refresh(Vec<Job>),
    /// A query the user asked: always answered.
    Ask(Job),
}

pub struct Worker {
    jobs: Sender<Message>,
    answers: Receiver<(Job, Result<Answer, String>)>,
}

impl Worker {
    pub fn spawn(feed: Arc<dyn Feed>) -> io::Result<Self> {
        let (jobs, inbox) = mpsc::channel();
        let (outbox, answers) = mpsc::channel();
        std::thread::Builder::new()
            .name("weft-tui-query".into())
            .spawn(move || serve(feed.as_ref(), &inbox, &outbox))?;
        Ok(Self { jobs, answers })
    }

    pub fn refresh(&self, jobs: Vec<Job>) {
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

fn serve(
    feed: &dyn Feed,
    inbox: &Receiver<Message>,
    outbox: &Sender<(Job, Result<Answer, String>)>,
) {
    while let Ok(first) = inbox.recv() {
        let mut asked = Vec::new();
        let mut refresh = None;
        for message in std::iter::once(first).chain(inbox.try_iter()) {
            match message {
                Message::Ask(job) => asked.push(job),
                Message::Refresh(jobs) => refresh = Some(jobs),
            }
        }
        for job in asked.into_iter().chain(refresh.into_iter().flatten()) {
            let answer = feed.ask(job.query());
            if outbox.send((job, answer)).is_err() {
                return;
            }
        }
    }
}
