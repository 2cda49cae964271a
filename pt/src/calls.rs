//! Function-level call traces from the instruction flow: near calls and
//! returns move a call stack, functions are named by the image's symbols,
//! and each call's duration comes from the flow's time.
//!
//! The trace starts inside some function whose entry it never saw: that
//! function, and every caller it returns to, is a root at depth 0 with no
//! duration. A call into code that is not traced (tracing stops at the
//! call and resumes at its return address) is one call with the time it
//! took. An overflow or a decoding error loses the stack.
//!
//! Times are the flow's: an instruction is at the time of the last timing
//! packet before the packet that decided it (or before, for instructions
//! no packet decides, like direct calls). So a duration runs from the
//! branch before the entry to the return's own packet: never shorter than
//! the call, longer by at most the span between two packets, which CYC
//! packets (sent with every TNT and TIP when enabled) keep short.

use std::collections::HashMap;

use crate::flow::{Class, Event, Step};
use crate::image::Image;

/// One line of a call trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `function` was called at `time`, `depth` calls deep.
    Entry {
        depth: usize,
        function: u64,
        time: u64,
    },
    /// `function` returned; `duration` where its entry was seen.
    Exit {
        depth: usize,
        function: u64,
        time: u64,
        duration: Option<u64>,
    },
    /// An event of the flow that breaks or pauses the stack.
    Note {
        depth: usize,
        time: u64,
        event: Event,
    },
}

impl Call {
    /// The same call with its times (TSC) put through `clock`, and its
    /// duration as the difference of its ends' converted times.
    #[must_use]
    pub fn with_clock(self, clock: impl Fn(u64) -> u64) -> Call {
        match self {
            Call::Entry {
                depth,
                function,
                time,
            } => Call::Entry {
                depth,
                function,
                time: clock(time),
            },
            Call::Exit {
                depth,
                function,
                time,
                duration,
            } => Call::Exit {
                depth,
                function,
                time: clock(time),
                duration: duration.map(|d| clock(time) - clock(time.saturating_sub(d))),
            },
            Call::Note { depth, time, event } => Call::Note {
                depth,
                time: clock(time),
                event,
            },
        }
    }
}

/// Turns flow steps into [`Call`]s.
pub struct Calls<'a> {
    image: &'a Image,
    stack: Vec<Frame>,
    /// The last instruction was a call: the next one is its target.
    calling: bool,
    /// The last instruction was a return: it has returned by the time of
    /// the next one (an instruction's time is before its own packet).
    returning: bool,
    /// A call went to code that is not traced, at this time.
    untraced: Option<(u64, u64)>,
    time: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    function: u64,
    entered: Option<u64>,
}

impl<'a> Calls<'a> {
    pub fn new(image: &'a Image) -> Self {
        Calls {
            image,
            stack: Vec::new(),
            calling: false,
            returning: false,
            untraced: None,
            time: 0,
        }
    }

    /// The function an address belongs to: its symbol's start, or the
    /// address itself where no symbol holds it.
    pub fn function(&self, ip: u64) -> u64 {
        self.image.symbol(ip).map_or(ip, |(_, offset)| ip - offset)
    }

    pub fn step(&mut self, step: &Step, out: &mut dyn FnMut(Call)) {
        match *step {
            Step::Insn {
                ip, class, time, ..
            } => self.insn(ip, class, time, out),
            Step::Event(ref event, _) => self.event(event, out),
            Step::Sideband(_) => {}
        }
    }

    fn insn(&mut self, ip: u64, class: Class, time: u64, out: &mut dyn FnMut(Call)) {
        self.time = time;
        if std::mem::take(&mut self.returning) {
            self.leave(time, out);
        }
        if std::mem::take(&mut self.calling) {
            self.enter(self.function(ip), Some(time), out);
        } else if self.stack.is_empty() {
            self.stack.push(Frame {
                function: self.function(ip),
                entered: None,
            });
        }
        match class {
            Class::Call => self.calling = true,
            Class::Return => self.returning = true,
            Class::Other => {}
        }
    }

    fn enter(&mut self, function: u64, time: Option<u64>, out: &mut dyn FnMut(Call)) {
        if let Some(time) = time {
            out(Call::Entry {
                depth: self.stack.len(),
                function,
                time,
            });
        }
        self.stack.push(Frame {
            function,
            entered: time,
        });
    }

    fn leave(&mut self, time: u64, out: &mut dyn FnMut(Call)) {
        let Some(frame) = self.stack.pop() else {
            return;
        };
        out(Call::Exit {
            depth: self.stack.len(),
            function: frame.function,
            time,
            duration: frame.entered.map(|entered| time.saturating_sub(entered)),
        });
    }

    fn event(&mut self, event: &Event, out: &mut dyn FnMut(Call)) {
        if std::mem::take(&mut self.returning) {
            self.leave(self.time, out);
        }
        match *event {
            // A disable right after a call: it went to code not traced,
            // where the FUP of an asynchronous disable or else the TIP.PGD
            // says.
            Event::Disabled { at, ip } if self.calling => {
                self.calling = false;
                self.untraced = at.or(ip).map(|target| (self.function(target), self.time));
            }
            Event::Enabled { .. } => {
                if let Some((function, entered)) = self.untraced.take() {
                    // Back from untraced code; the time is that of the
                    // packets that resumed tracing.
                    self.enter(function, Some(entered), out);
                    self.leave(self.time.max(entered), out);
                }
            }
            Event::Overflow { .. } | Event::Error { .. } => {
                out(Call::Note {
                    depth: self.stack.len(),
                    time: self.time,
                    event: event.clone(),
                });
                self.stack.clear();
                self.calling = false;
                self.untraced = None;
            }
            _ => {}
        }
    }
}

/// Calls, total and self time per function, over the calls whose entry
/// and exit the trace holds.
#[derive(Debug, Default)]
pub struct Profile {
    functions: HashMap<u64, Cost>,
    /// Time of the children of each open call, by depth.
    children: Vec<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub calls: u64,
    pub total: u64,
    pub own: u64,
}

impl Profile {
    pub fn add(&mut self, call: &Call) {
        match *call {
            Call::Entry { depth, .. } => {
                self.children.truncate(depth);
                self.children.resize(depth + 1, 0);
            }
            Call::Exit {
                depth,
                function,
                duration: Some(duration),
                ..
            } => {
                let children = self.children.get(depth).copied().unwrap_or(0);
                self.children.truncate(depth);
                if let Some(parent) = depth.checked_sub(1).and_then(|d| self.children.get_mut(d)) {
                    *parent += duration;
                }
                let cost = self.functions.entry(function).or_default();
                cost.calls += 1;
                cost.total += duration;
                cost.own += duration.saturating_sub(children);
            }
            Call::Exit { depth, .. } | Call::Note { depth, .. } => self.children.truncate(depth),
        }
    }

    /// Functions by own time, most first.
    pub fn by_own_time(&self) -> Vec<(u64, Cost)> {
        let mut list: Vec<(u64, Cost)> = self.functions.iter().map(|(&f, &c)| (f, c)).collect();
        list.sort_by(|a, b| b.1.own.cmp(&a.1.own).then(a.0.cmp(&b.0)));
        list
    }
}

/// A function's name: its symbol, or its address.
pub fn name(image: &Image, function: u64) -> String {
    match image.symbol(function) {
        Some((name, 0)) => name.to_string(),
        Some((name, offset)) => format!("{name}+{offset:#x}"),
        None => format!("{function:#x}"),
    }
}

/// Writes calls as an indented tree, as uftrace lays it out: a call with
/// no calls inside is one line with its duration. Times count from the
/// first line, in the calls' unit (TSC ticks, or ns after
/// [`Call::with_clock`], which `unit` names in the header).
pub struct Listing<'a> {
    image: &'a Image,
    out: &'a mut dyn std::io::Write,
    /// An entry not written yet: it becomes `f();` if its exit is next.
    held: Option<(usize, u64, u64)>,
    start: Option<u64>,
}

impl<'a> Listing<'a> {
    pub fn new(
        image: &'a Image,
        out: &'a mut dyn std::io::Write,
        unit: Option<&str>,
    ) -> std::io::Result<Self> {
        let (time, duration) = match unit {
            Some(unit) => (format!("TIME({unit})"), format!("DURATION({unit})")),
            None => ("TIME".to_string(), "DURATION".to_string()),
        };
        writeln!(out, "{time:>12} {duration:>10}  FUNCTION")?;
        Ok(Listing {
            image,
            out,
            held: None,
            start: None,
        })
    }

    /// Times as they are rather than from the first line: clock times
    /// that line up with other records of the same clock.
    #[must_use]
    pub fn absolute(mut self) -> Self {
        self.start = Some(0);
        self
    }

    pub fn line(&mut self, call: &Call) -> std::io::Result<()> {
        if let Call::Exit {
            depth,
            function,
            duration: Some(duration),
            ..
        } = *call
            && let Some((_, _, time)) = self.held.take_if(|h| (h.0, h.1) == (depth, function))
        {
            let name = name(self.image, function);
            return self.write(time, Some(duration), depth, &format!("{name}();"));
        }
        self.flush()?;
        match call {
            Call::Entry {
                depth,
                function,
                time,
            } => self.held = Some((*depth, *function, *time)),
            Call::Exit {
                depth,
                function,
                time,
                duration,
            } => {
                let text = format!("}} /* {} */", name(self.image, *function));
                self.write(*time, *duration, *depth, &text)?;
            }
            Call::Note { depth, time, event } => {
                self.write(*time, None, *depth, &format!("[{event}]"))?;
            }
        }
        Ok(())
    }

    /// Write the entry still held back, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some((depth, function, time)) = self.held.take() {
            let text = format!("{}() {{", name(self.image, function));
            self.write(time, None, depth, &text)?;
        }
        Ok(())
    }

    fn write(
        &mut self,
        time: u64,
        duration: Option<u64>,
        depth: usize,
        text: &str,
    ) -> std::io::Result<()> {
        let start = *self.start.get_or_insert(time);
        let duration = duration.map(|d| d.to_string()).unwrap_or_default();
        let indent = "  ".repeat(depth);
        writeln!(
            self.out,
            "{:>12} {duration:>10}  {indent}{text}",
            time.saturating_sub(start)
        )
    }
}
