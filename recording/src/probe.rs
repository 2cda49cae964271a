//! The shape every probe of a capture shares, whatever its family
//! (syscalls, the other event sources, application records): it drains
//! into the one sink, the capture's [`Consumer`], detaches, says where it
//! is attached and accounts for each of its sources. A capture's probes
//! are a list of these, which `session` drives.

use crate::error::Result;
use weft_kernel::{
    delivery::Delivery,
    ebpf::ProgramCost,
    events::{EventProbe, SourceLosses},
    source::SourceHooks,
    syscall::{self, SyscallProbe},
};

use crate::app::{self, AppLosses, AppServer, Message};
use weft_capture::{
    metadata::{Lost, SourceNote},
    registry,
};

/// The syscall probe's counts as `weft.json` (and `stat --json`) notes them.
pub fn syscalls_noted(losses: &syscall::Losses) -> Lost {
    Lost {
        enter_table_full: Some(losses.enter_table_full),
        unpaired_exits: Some(losses.unpaired_exits),
        ..delivered(&losses.delivery, losses.lost())
    }
}

/// A kernel ring's counts as `weft.json` notes them, `lost` of them lost.
pub(crate) fn delivered(delivery: &Delivery, lost: u64) -> Lost {
    Lost {
        lost,
        received: Some(delivery.received),
        seen: Some(delivery.seen),
        ring_full: Some(delivery.ring_full),
        ring_full_per_cpu: Some(delivery.ring_full_per_cpu.clone()),
        ring_peak_percent: Some(delivery.ring_peak_percent.into()),
        skipped: Some(delivery.skipped),
        ..Lost::default()
    }
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

    /// Work another thread handed over and woke the session for (a
    /// peer's request to keep a window).
    fn poke(&mut self) {}

    /// Every probe was drained once: what waited for the records of one
    /// batch (a firing's thread's connections) can be done.
    fn drained(&mut self) {}

    /// Called every tick with what was received and lost so far;
    /// `Ok(false)` stops the capture.
    fn tick(&mut self, accounting: &Accounting) -> Result<bool>;
}

/// One probe of a capture.
pub trait Probe {
    /// Hands a bounded batch of waiting records to `consumer`; returns
    /// whether records were left behind (to drain again at once).
    fn drain(&mut self, consumer: &mut dyn Consumer) -> bool;

    /// What each of its sources received and lost so far.
    fn accounts(&self) -> Result<Vec<Account>>;

    /// Each of its sources and where it is attached, for `weft.json`.
    fn describe(&self) -> Vec<(&'static str, SourceNote)>;

    /// Stops new records; those already waiting can still be drained.
    fn detach(&mut self) -> Result<()>;

    /// Records too short or of no known source; never expected.
    fn malformed(&self) -> u64 {
        0
    }

    /// Called every second while the capture runs: attaches to what came
    /// up since (network interfaces).
    fn refresh(&mut self) {}
}

/// The probes of one capture.
pub type Probes = Vec<Box<dyn Probe>>;

/// What one source received and lost, and why.
#[derive(Clone, Debug)]
pub struct Account {
    pub name: &'static str,
    pub losses: Losses,
    /// What the source's kernel programs have cost so far (counted only
    /// while the kernel's run-time statistics are on, `stat --cost`).
    pub costs: Vec<ProgramCost>,
}

/// A source's counters, as its family keeps them.
#[derive(Clone, Debug)]
pub enum Losses {
    Syscalls(syscall::Losses),
    Event(SourceLosses),
    App(AppLosses),
}

/// What each source received and lost, in the order of its probe.
#[derive(Clone, Default)]
pub struct Accounting(pub Vec<Account>);

impl Accounting {
    /// Records received, all sources told.
    pub fn received(&self) -> u64 {
        self.0.iter().map(Account::received).sum()
    }

    /// Records lost, all sources told.
    pub fn lost(&self) -> u64 {
        self.0.iter().map(Account::lost).sum()
    }

    /// Reads every probe's counters.
    pub fn of(probes: &Probes) -> Result<Self> {
        let mut accounts = Vec::new();
        for probe in probes {
            accounts.extend(probe.accounts()?);
        }
        Ok(Self(accounts))
    }
}

impl Account {
    pub fn received(&self) -> u64 {
        match &self.losses {
            Losses::Syscalls(l) => l.delivery.received,
            Losses::Event(l) => l.delivery.received,
            Losses::App(l) => l.received,
        }
    }

    /// Records the source produced that were never received.
    pub fn lost(&self) -> u64 {
        match &self.losses {
            Losses::Syscalls(l) => l.lost(),
            Losses::Event(l) => l.lost(),
            Losses::App(l) => l.dropped,
        }
    }

    /// Its kernel ring's counts, when it has a ring.
    pub fn delivery(&self) -> Option<&Delivery> {
        match &self.losses {
            Losses::Syscalls(l) => Some(&l.delivery),
            Losses::Event(l) => Some(&l.delivery),
            Losses::App(_) => None,
        }
    }

    /// Its entry in `weft.json`'s `lost`.
    pub fn noted(&self) -> Lost {
        match &self.losses {
            Losses::Syscalls(l) => syscalls_noted(l),
            Losses::Event(l) => Lost {
                table_full: Some(l.table_full),
                ..delivered(&l.delivery, l.lost())
            },
            Losses::App(l) => Lost {
                lost: l.dropped,
                received: Some(l.received),
                rejected: Some(l.rejected),
                dropped_by_clients: Some(l.dropped),
                ..Lost::default()
            },
        }
    }

    /// One line for the report: received, lost and why.
    pub fn line(&self) -> String {
        let (name, received, lost) = (self.name, self.received(), self.lost());
        match &self.losses {
            Losses::Syscalls(l) => format!(
                "{name}: {received} records, lost {lost} (ring full {}, enter table full {}{}); rings at most {}% full",
                l.delivery.ring_full,
                l.enter_table_full,
                skipped(&l.delivery),
                l.delivery.ring_peak_percent
            ),
            Losses::Event(l) => format!(
                "{name}: {received} records, lost {lost} (ring full {}{}); {} intervals not started (table full); rings at most {}% full",
                l.delivery.ring_full,
                skipped(&l.delivery),
                l.table_full,
                l.delivery.ring_peak_percent
            ),
            Losses::App(l) => format!(
                "{name}: {received} records, lost {lost} (dropped by clients while weft lagged); {} connections closed for a bad line",
                l.rejected
            ),
        }
    }
}

/// The events the kernel ran no program for, in a line's list of losses
/// (nothing when there were none).
pub(crate) fn skipped(delivery: &Delivery) -> String {
    match delivery.skipped {
        0 => String::new(),
        n => format!(", skipped by the kernel {n}"),
    }
}

impl Probe for SyscallProbe {
    fn drain(&mut self, consumer: &mut dyn Consumer) -> bool {
        SyscallProbe::drain(self, |now, record| {
            consumer.take(now, Arrival::Syscall(record));
        })
        .more
    }

    fn accounts(&self) -> Result<Vec<Account>> {
        Ok(vec![Account {
            name: registry::SYSCALLS,
            losses: Losses::Syscalls(self.losses()),
            costs: self.costs()?,
        }])
    }

    fn describe(&self) -> Vec<(&'static str, SourceNote)> {
        let about = SourceNote {
            filter: Some(format!("{:?}", self.filter())),
            ..SourceNote::at(SyscallProbe::describe(self))
        };
        vec![(registry::SYSCALLS, about)]
    }

    fn detach(&mut self) -> Result<()> {
        Ok(SyscallProbe::detach(self)?)
    }

    fn malformed(&self) -> u64 {
        SyscallProbe::malformed(self)
    }
}

impl Probe for EventProbe {
    fn drain(&mut self, consumer: &mut dyn Consumer) -> bool {
        EventProbe::drain(self, |hooks, now, record| {
            consumer.take(now, Arrival::Event(hooks, record));
        })
        .more
    }

    fn accounts(&self) -> Result<Vec<Account>> {
        Ok(self
            .losses()
            .into_iter()
            .map(|(hooks, losses)| Account {
                name: hooks.name,
                losses: Losses::Event(losses),
                costs: Vec::new(),
            })
            .collect())
    }

    fn describe(&self) -> Vec<(&'static str, SourceNote)> {
        EventProbe::describe(self)
            .into_iter()
            .map(|(name, attach)| {
                let mut about = SourceNote::at(attach);
                // The packets' interfaces by index, named as they are now
                // (`weft export --format pcapng` names them so).
                if name == "net" {
                    about.interfaces = (self.net_interfaces().into_iter())
                        .map(|(index, name)| (index.to_string(), name))
                        .collect();
                }
                (name, about)
            })
            .collect()
    }

    fn detach(&mut self) -> Result<()> {
        EventProbe::detach(self);
        Ok(())
    }

    fn malformed(&self) -> u64 {
        EventProbe::malformed(self)
    }

    fn refresh(&mut self) {
        self.attach_new_interfaces();
    }
}

impl Probe for AppServer {
    fn drain(&mut self, consumer: &mut dyn Consumer) -> bool {
        AppServer::drain(self, |message| {
            consumer.take(weft_store::now_ns(), Arrival::App(message));
        });
        false
    }

    fn accounts(&self) -> Result<Vec<Account>> {
        Ok(vec![Account {
            name: app::NAME,
            losses: Losses::App(self.losses()),
            costs: Vec::new(),
        }])
    }

    fn describe(&self) -> Vec<(&'static str, SourceNote)> {
        vec![(app::NAME, SourceNote::at(app::SOCKET))]
    }

    /// Records pushed after the capture stops are not taken; the socket
    /// closes with the server.
    fn detach(&mut self) -> Result<()> {
        Ok(())
    }
}
