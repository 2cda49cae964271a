//! `weft trace --store DIR`: every event whose predicate held, kept in a
//! capture directory for `weft query`. Each attach point in the kernel is a
//! source named after its probe (`sys_enter_openat`, `vfs_read_ret`), with
//! `time`, `pid`, `tid`, `uid`, `cpu` and the record's integer fields; thread
//! names go to the capture's task records.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use crate::error::{Context as _, Result};
use weft_ingest::tasks::TaskNames;
use weft_kernel::delivery::Delivery;
use weft_oneliner::{
    Attach, Event, Plan, Target, check::MAX_RAW, kernel::FieldKind as Kind, plan::KeptStart,
};
use weft_store::{Config, Field, FieldKind, SourceId, Store};

use weft_capture::{
    capture,
    metadata::{self, FieldKinds, Metadata, SourceNote},
};

use crate::probe::delivered;

/// Values every stored event has, before the record's fields.
const BUILTINS: [&str; 5] = ["time", "pid", "tid", "uid", "cpu"];

/// Makes the kernel send every event and copy every integer field of each
/// record (up to the copy limit), not only those the program reads.
pub fn copy_all_fields(plan: &mut Plan) {
    for attach in &mut plan.attaches {
        // Every event is kept, so every event comes to user space.
        attach.agg = None;
        if let Some(KeptStart::Store { send, .. }) = &mut attach.start {
            *send = true;
        }
        let end = record_fields(attach)
            .map(|f| (f.offset + f.size).next_multiple_of(8))
            .filter(|end| *end <= MAX_RAW)
            .max()
            .unwrap_or(0);
        attach.raw_len = attach.raw_len.max(end);
    }
}

pub struct KeptEvents {
    /// The attach points (their fields), as planned.
    attaches: Vec<Attach>,
    store: Store,
    /// The source of each attach point (`None`: runs in weft).
    sources: Vec<Option<SourceId>>,
    tasks: TaskNames,
    metadata: Metadata,
    session: usize,
    dir: Arc<weft_store::Dir>,
    error: Option<crate::error::Error>,
}

impl KeptEvents {
    /// Creates the capture in `dir` (new or empty) with a source per attach point.
    pub fn create(dir: &Path, plan: &Plan) -> Result<Self> {
        let mut fresh = capture::prepare_dir(dir, false)?;
        let mut store = Store::open(dir, &Config::default())
            .with_context(|| format!("failed to open {}", dir.display()))?;
        let mut kinds = BTreeMap::new();
        let mut described = BTreeMap::new();
        let mut sources = Vec::new();
        for attach in &plan.attaches {
            if !attach.in_kernel() {
                sources.push(None);
                continue;
            }
            let name = source_name(attach, &kinds);
            let fields = stored_fields(attach);
            let store_fields = fields
                .iter()
                .zip(0u32..)
                .map(|(field, i)| Field::new(field, i * 8, FieldKind::I64))
                .collect();
            sources.push(Some(store.define_source(&name, store_fields)?));
            let mut field_kinds: FieldKinds = fields
                .iter()
                .map(|f| (f.clone(), "int".to_owned()))
                .collect();
            field_kinds.insert("time".into(), "time".into());
            kinds.insert(name.clone(), field_kinds);
            described.insert(name, SourceNote::at(attach.target.name()));
        }
        let tasks = TaskNames::define(&mut store)?;
        let capture_dir = Arc::clone(store.dir());
        let (mut metadata, session) = capture::start_session(&capture_dir, described)?;
        metadata.oneliner_sources = kinds;
        metadata::write_metadata(&capture_dir, &metadata)?;
        fresh.keep();
        Ok(Self {
            attaches: plan.attaches.clone(),
            store,
            sources,
            tasks,
            metadata,
            session,
            dir: capture_dir,
            error: None,
        })
    }

    /// Appends `event` (of `plan`'s attach point) to its source.
    pub fn append(&mut self, event: &Event<'_>) {
        let Some(Some(source)) = self.sources.get(event.attach).copied() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let attach = &self.attaches[event.attach];
        let mut values = vec![
            event.ns.cast_signed(),
            event.pid.into(),
            event.tid.into(),
            event.uid.into(),
            event.cpu.into(),
        ];
        // A field past the copied bytes (beyond the copy limit) reads 0.
        values.extend(
            record_fields(attach)
                .map(|f| weft_oneliner::run::integer(event.raw, f.offset, f.size, f.signed)),
        );
        let payload: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let now = weft_store::now_ns();
        let appended = self
            .store
            .append_at(source, now, Some(event.ns), &payload)
            .and_then(|_| {
                self.tasks
                    .note(&mut self.store, now, event.pid, event.tid, event.comm)
            });
        if let Err(error) = appended {
            self.error = Some(error.into());
        }
    }

    /// Makes what was appended visible to readers.
    pub fn publish(&mut self) {
        self.store.publish();
    }

    /// Closes the store and completes `weft.json` with what was lost.
    pub fn finish(self, delivery: &Delivery) -> Result<()> {
        let Self {
            store,
            mut metadata,
            session,
            dir,
            error,
            ..
        } = self;
        capture::release_reserve(&dir);
        let closed = store.close().context("failed to finish the capture");
        let entry = &mut metadata.sessions[session];
        entry.end_ns = Some(weft_store::now_ns());
        entry.lost =
            BTreeMap::from([("trace".to_owned(), delivered(delivery, delivery.ring_full))]);
        entry.complete = error.is_none() && closed.is_ok();
        metadata::write_metadata(&dir, &metadata)?;
        if let Some(error) = error {
            return Err(error.within("storing events stopped"));
        }
        closed
    }
}

/// The integer fields of a record that are stored (strings are not).
fn record_fields(attach: &Attach) -> impl Iterator<Item = &weft_oneliner::Field> {
    attach
        .fields
        .iter()
        .filter(|f| matches!(f.kind, Kind::Int | Kind::Pointer { .. }))
}

/// Column names: the builtins, then the record's fields (`args_` before a
/// name that a builtin already has).
fn stored_fields(attach: &Attach) -> Vec<String> {
    let mut names: Vec<String> = BUILTINS.iter().map(|b| (*b).to_string()).collect();
    for field in record_fields(attach) {
        let name = if BUILTINS.contains(&field.name.as_str()) {
            format!("args_{}", field.name)
        } else {
            field.name.clone()
        };
        names.push(name);
    }
    names
}

/// A source name from the probe, unique among `taken`.
fn source_name(attach: &Attach, taken: &BTreeMap<String, FieldKinds>) -> String {
    let base = match &attach.target {
        Target::Tracepoint { name, .. } => name.clone(),
        Target::RawTracepoint { name } => format!("{name}_raw"),
        Target::Kprobe { function, exit } | Target::Fentry { function, exit, .. } => {
            format!("{function}{}", if *exit { "_ret" } else { "" })
        }
        Target::Uprobe { symbol, exit, .. } => {
            format!("{symbol}{}", if *exit { "_ret" } else { "" })
        }
        Target::Usdt { provider, name, .. } => format!("{provider}_{name}"),
        Target::Profile { unit, n } => format!("profile_{n}{unit}"),
        Target::PerfEvent { event, .. } => event.name().to_owned(),
        Target::Watchpoint { address, .. } => format!("watchpoint_{address:x}"),
        Target::WatchArg { function, .. } => format!("watchpoint_{function}"),
        _ => "events".into(),
    };
    let base: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut name = base.clone();
    let mut n = 1;
    while taken.contains_key(&name) {
        n += 1;
        name = format!("{base}_{n}");
    }
    name
}
