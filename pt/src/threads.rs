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

use std::collections::{BTreeMap, HashMap};

use crate::flow::{Class, Event, Step};
use crate::image::Image;
use crate::perf_data::{Switch, TimeConv};
use crate::time::TscClock;

/// Who ran on one CPU when, and the code of each process.
pub struct Threads<'a> {
    /// The CPU's switches, in time order.
    pub switches: Vec<Switch>,
    /// TSC to the switches' clock.
    pub clock: TscToNs,
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
            Step::Event(Event::Enabled { .. }, _) => self.held.push(step),
            Step::Event(_, _) | Step::Sideband(_) => match self.current {
                Some(thread) if self.held.is_empty() => out(thread, step),
                _ => self.held.push(step),
            },
        }
    }
}

/// Each thread's steps over all the CPUs it ran on, kept to what a call
/// trace reads (calls, returns and the instruction after each, events and
/// the instruction before each: the others only move the time, which the
/// next kept step sets again), in stretches (one CPU, one thread, no other
/// thread between) that put the CPUs' traces together in time.
#[derive(Default)]
pub struct Stretches {
    by_thread: BTreeMap<(i32, i32), Vec<Stretch>>,
    /// The CPU and thread of the last step taken.
    current: Option<(usize, (i32, i32))>,
}

#[derive(Default)]
struct Stretch {
    /// The time of its first instruction.
    start: Option<u64>,
    steps: Vec<Step>,
    /// An instruction dropped unless an event follows it.
    held: Option<Step>,
    /// Whether the next instruction is kept.
    keep_next: bool,
}

impl Stretches {
    /// Takes `step`, which `thread` ran on the CPU of trace `cpu`.
    pub fn push(&mut self, cpu: usize, thread: Switch, step: Step) {
        let key = (thread.pid, thread.tid);
        let stretches = self.by_thread.entry(key).or_default();
        if self.current != Some((cpu, key)) || stretches.is_empty() {
            stretches.push(Stretch {
                keep_next: true,
                ..Stretch::default()
            });
            self.current = Some((cpu, key));
        }
        let stretch = stretches.last_mut().expect("pushed above");
        match &step {
            Step::Insn { class, time, .. } => {
                stretch.start.get_or_insert(*time);
                let call_or_return = !matches!(class, Class::Other);
                if stretch.keep_next || call_or_return {
                    stretch.held = None;
                    stretch.steps.push(step);
                } else {
                    stretch.held = Some(step);
                }
                stretch.keep_next = call_or_return;
            }
            Step::Event(_, _) => {
                stretch.steps.extend(stretch.held.take());
                stretch.steps.push(step);
                stretch.keep_next = true;
            }
            // Sideband is the flow's, not a thread's.
            Step::Sideband(_) => {}
        }
    }

    /// Each thread, by (pid, tid), with its steps in time order.
    pub fn threads(self) -> impl Iterator<Item = ((i32, i32), Vec<Step>)> {
        self.by_thread.into_iter().map(|(key, mut stretches)| {
            // A thread runs on one CPU at a time: its stretches do not
            // overlap, and their starts order them.
            stretches.sort_by_key(|s| s.start.unwrap_or(u64::MAX));
            let steps = stretches
                .into_iter()
                .flat_map(|s| s.steps.into_iter().chain(s.held))
                .collect();
            (key, steps)
        })
    }
}

/// How a recording's TSC becomes ns (not [`crate::time::Clock`], the
/// time a trace is at, packet by packet).
#[derive(Clone, Copy)]
pub enum TscToNs {
    /// perf's clock, from a perf.data file.
    Perf(TimeConv),
    /// `CLOCK_MONOTONIC`, from a `weft pt record` capture: the clock of
    /// `weft record`'s captures.
    Monotonic(TscClock),
}

impl TscToNs {
    pub fn ns(self, tsc: u64) -> u64 {
        match self {
            Self::Perf(conv) => conv.ns(tsc),
            Self::Monotonic(clock) => clock.ns(tsc),
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
    fn a_thread_that_moves_between_cpus_is_put_together_in_time() {
        let insn = |ip, class, time| Step::Insn {
            ip,
            speculative: false,
            class,
            time,
        };
        let (a, b) = (switch(0, 10), switch(0, 20));
        let mut stretches = Stretches::default();
        // CPU 1 is decoded first, though A ran there later (from 50).
        for step in [
            insn(0x10, Class::Other, 50),
            insn(0x11, Class::Return, 51),
            insn(0x12, Class::Other, 52),
            insn(0x13, Class::Other, 53),
        ] {
            stretches.push(1, a, step);
        }
        // CPU 0: A from 10, then B, then A again from 30.
        stretches.push(0, a, insn(0x1, Class::Other, 10));
        stretches.push(0, a, insn(0x2, Class::Other, 11));
        stretches.push(0, a, insn(0x3, Class::Call, 12));
        stretches.push(0, a, insn(0x4, Class::Other, 13));
        stretches.push(0, a, insn(0x5, Class::Other, 14));
        stretches.push(0, a, insn(0x6, Class::Other, 15));
        stretches.push(
            0,
            a,
            Step::Event(Event::Disabled { at: None, ip: None }, None),
        );
        stretches.push(0, b, insn(0x100, Class::Other, 20));
        stretches.push(0, a, insn(0x7, Class::Other, 30));
        let threads: Vec<((i32, i32), Vec<String>)> = stretches
            .threads()
            .map(|(key, steps)| {
                let shown = steps
                    .iter()
                    .map(|s| match s {
                        Step::Insn { ip, .. } => format!("{ip:x}"),
                        Step::Event(e, _) => e.to_string(),
                        other @ Step::Sideband(_) => other.to_string(),
                    })
                    .collect();
                (key, shown)
            })
            .collect();
        // A: the first of each stretch, the call and the one after it, the
        // one before the event, the event, the return and the one after
        // it, and each stretch's last; 0x2 and 0x5 only moved the time.
        assert_eq!(
            threads,
            [
                (
                    (10, 11),
                    ["1", "3", "4", "6", "disabled", "7", "10", "11", "12", "13"]
                        .map(String::from)
                        .to_vec()
                ),
                ((20, 21), vec!["100".to_owned()]),
            ]
        );
    }

    #[test]
    fn steps_go_to_the_thread_the_switches_say_ran_then() {
        let images = HashMap::from([(10, Image::new()), (20, Image::new())]);
        let none = Image::new();
        // perf time = 100 + 2 * tsc.
        let threads = Threads {
            switches: vec![switch(200, 10), switch(1100, 20)],
            clock: TscToNs::Perf(crate::perf_data::TimeConv {
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
            class: crate::flow::Class::Other,
            time,
        };
        let enabled = |ip| Step::Event(Event::Enabled { ip, resumed: false }, None);
        let disabled = Step::Event(Event::Disabled { at: None, ip: None }, None);
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
                    Step::Event(event, _) => format!("{event}"),
                    other @ Step::Sideband(_) => format!("{other}"),
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
