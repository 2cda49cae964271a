//! One CPU's Intel PT trace split between the threads that ran there, by a
//! perf.data file's context-switch records (`perf record -a -e
//! intel_pt//u` records them, `SWITCH_CPU_WIDE`).
//!
//! User-space tracing stops in the kernel, where the switches happen, and
//! starts again (a TIP.PGE) in the next thread. So the flow takes the code
//! of the process that the switch records say runs at that TSC time
//! ([`Threads::code_at`]; a process without code is skipped), and
//! [`Router`] hands each step to that thread. The switches come from a
//! perf.data file or from a `weft pt record` capture's sideband.

use std::collections::HashMap;

use weft_pt::flow::{Event, Step};
use weft_pt::image::Image;
use weft_pt::perf::Switch;

use crate::pt::Clock;

/// Who ran on one CPU when, and the code of each process.
pub struct Threads<'a> {
    /// The CPU's switches, in time order.
    pub switches: Vec<Switch>,
    /// TSC to the switches' clock.
    pub clock: Clock,
    /// Each process's code, by pid.
    pub images: &'a HashMap<i32, Image>,
    /// The code of a task without mappings (the idle task, a kernel thread).
    pub none: &'a Image,
}

impl Threads<'_> {
    /// The switch in force at `tsc`: `None` before the first.
    pub fn at(&self, tsc: u64) -> Option<Switch> {
        let time = self.clock.ns(tsc);
        let after = self.switches.partition_point(|s| s.time <= time);
        after.checked_sub(1).map(|i| self.switches[i])
    }

    /// The code of process `pid` (no code: an empty image).
    pub fn image(&self, pid: i32) -> &Image {
        self.images.get(&pid).unwrap_or(self.none)
    }

    /// The code running at `tsc`, if it is at hand.
    pub fn code_at(&self, tsc: u64) -> Option<&Image> {
        self.images.get(&self.at(tsc)?.pid)
    }
}

/// Hands each step to the thread that ran it. Tracing starts with events
/// (TIP.PGE) before the instruction whose time says which thread it is,
/// so those wait for it.
#[derive(Default)]
pub struct Router {
    current: Option<Switch>,
    held: Vec<Step>,
}

impl Router {
    /// Passes `step`, with the thread that ran it, to `out`; steps before
    /// the first switch record are of no known thread and are dropped.
    pub fn step(&mut self, threads: &Threads, step: Step, out: &mut dyn FnMut(Switch, Step)) {
        match step {
            Step::Insn { time, .. } => {
                if self.current.is_none() || !self.held.is_empty() {
                    self.current = threads.at(time);
                }
                let held = std::mem::take(&mut self.held);
                let Some(thread) = self.current else {
                    return;
                };
                for step in held {
                    out(thread, step);
                }
                out(thread, step);
            }
            Step::Event(Event::Enabled { .. }) => self.held.push(step),
            Step::Event(_) => match self.current {
                Some(thread) if self.held.is_empty() => out(thread, step),
                _ => self.held.push(step),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(time: u64, pid: i32) -> Switch {
        Switch {
            time,
            cpu: 0,
            pid,
            tid: pid + 1,
        }
    }

    #[test]
    fn steps_go_to_the_thread_the_switches_say_ran_then() {
        let images = HashMap::from([(10, Image::new()), (20, Image::new())]);
        let none = Image::new();
        // perf time = 100 + 2 * tsc.
        let threads = Threads {
            switches: vec![switch(200, 10), switch(1100, 20)],
            clock: Clock::Perf(weft_pt::perf::TimeConv {
                shift: 0,
                mult: 2,
                zero: 100,
            }),
            images: &images,
            none: &none,
        };
        assert_eq!(threads.at(0), None);
        assert_eq!(threads.at(50).map(|s| s.pid), Some(10));
        assert_eq!(threads.at(500).map(|s| s.pid), Some(20));
        assert!(std::ptr::eq(
            threads.code_at(499).unwrap(),
            &raw const images[&10]
        ));
        assert!(threads.code_at(10).is_none(), "before the first switch");

        let insn = |ip, time| Step::Insn {
            ip,
            speculative: false,
            class: weft_pt::flow::Class::Other,
            time,
        };
        let enabled = |ip| Step::Event(Event::Enabled { ip, resumed: false });
        let disabled = Step::Event(Event::Disabled { ip: None });
        let mut seen = Vec::new();
        let mut router = Router::default();
        for step in [
            insn(1, 10),
            enabled(2),
            insn(2, 60),
            disabled.clone(),
            enabled(3),
            insn(3, 600),
        ] {
            router.step(&threads, step, &mut |thread, step| {
                let what = match step {
                    Step::Insn { ip, .. } => format!("insn {ip}"),
                    Step::Event(event) => format!("{event}"),
                };
                seen.push((thread.pid, what));
            });
        }
        let seen: Vec<(i32, &str)> = seen.iter().map(|(p, w)| (*p, w.as_str())).collect();
        assert_eq!(
            seen,
            [
                (10, "enabled"),
                (10, "insn 2"),
                (10, "disabled"),
                (20, "enabled"),
                (20, "insn 3"),
            ],
            "the instruction before any switch is dropped"
        );
    }
}
