//! Triggers (`weft record --trigger 'SOURCE where CONDITION'`): a condition
//! of the query language tested on every record as it is stored. A match
//! pins the window around it (`--keep -30s..+10s`), so that retention
//! (`--retain`, `--max-disk`) keeps everything every source recorded then,
//! and is logged in the `triggers` source. This is retroactive sampling:
//! record everything, keep what a symptom points at.
//!
//! A match inside its trigger's current window extends that window (one
//! firing); a match after it fires again, at most `--max-triggers` times per
//! period, so a spammy trigger cannot pin the whole ring. SIGUSR2 fires the
//! manual trigger, number 0.

use std::collections::VecDeque;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use weft_query::{Column, bind::Pred};
use weft_store::{Field, FieldKind, SourceId, Store};

use crate::capture;

/// The source of the trigger log.
pub const TRIGGERS: &str = "triggers";

/// What to keep around a match, and how often a trigger may fire.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// ns kept before the matching record's arrival.
    pub before: u64,
    /// ns kept after it.
    pub after: u64,
    /// At most this many firings per trigger in `per` ns.
    pub limit: Option<(usize, u64)>,
}

/// One `--trigger`, or the manual one.
struct Rule {
    text: String,
    state: State,
    /// Arrival times of recent firings, for the rate limit.
    recent: VecDeque<u64>,
    /// The window of the last firing, in arrival time.
    window: Option<(u64, u64)>,
    fired: u64,
    /// Matches inside the current window: they extend it.
    merged: u64,
    /// Matches the rate limit refused.
    suppressed: u64,
}

enum State {
    /// Fired by SIGUSR2 only.
    Manual,
    /// On an application source not defined yet.
    Waiting,
    Bound(Test),
    /// Its application source came without the fields it names.
    Broken,
}

/// The condition of a rule, bound to its source's columns.
struct Test {
    source: SourceId,
    pred: Pred,
    columns: Vec<Column>,
}

pub struct Triggers {
    rules: Vec<Rule>,
    policy: Policy,
    /// A shell command run at each firing (`--on-trigger`), and the
    /// capture it names.
    hook: Option<(String, std::path::PathBuf)>,
    /// Notes of manual triggers, with their arrival times.
    notes: Vec<(u64, String)>,
    /// The log source, defined at the first firing.
    log: Option<SourceId>,
    /// A window extension not yet written to the store (written each tick:
    /// one metadata write a second, however often matches extend it).
    pending: Option<(u64, u64)>,
}

impl Triggers {
    /// Parses and binds each `SOURCE where CONDITION` against the sources
    /// `store` has now.
    pub fn new(
        store: &Store,
        metadata: &Value,
        texts: &[String],
        policy: Policy,
        hook: Option<(String, std::path::PathBuf)>,
    ) -> Result<Self> {
        let mut rules = vec![Rule::new("manual (SIGUSR2)".into(), State::Manual)];
        rules.extend(
            texts
                .iter()
                .map(|text| Rule::new(text.clone(), State::Waiting)),
        );
        let mut triggers = Self {
            rules,
            policy,
            hook,
            notes: Vec::new(),
            log: None,
            pending: None,
        };
        let catalog = capture::catalog(&store.reader().snapshot(), metadata, false)?;
        for rule in &mut triggers.rules[1..] {
            match bind(&catalog, &rule.text).with_context(|| format!("--trigger {}", rule.text))? {
                Some(test) => rule.state = State::Bound(test),
                None => eprintln!(
                    "weft: --trigger {}: waits for an application to define its source",
                    rule.text
                ),
            }
        }
        Ok(triggers)
    }

    /// Binds the triggers waiting for an application source, after one was
    /// defined; one that does not fit its source says why and is dropped
    /// (recording goes on).
    pub fn bind_waiting(&mut self, store: &Store, metadata: &Value) -> Result<()> {
        let catalog = capture::catalog(&store.reader().snapshot(), metadata, false)?;
        for rule in &mut self.rules {
            if !matches!(rule.state, State::Waiting) {
                continue;
            }
            match bind(&catalog, &rule.text) {
                Ok(Some(test)) => rule.state = State::Bound(test),
                Ok(None) => {}
                Err(error) => {
                    eprintln!("weft: --trigger {}: {error:#}; it is dropped", rule.text);
                    rule.state = State::Broken;
                }
            }
        }
        Ok(())
    }

    /// Tests a record of `source` that arrived `now`; `time` is its own
    /// timestamp, when it has one.
    pub fn check(
        &mut self,
        store: &mut Store,
        source: SourceId,
        now: u64,
        time: Option<u64>,
        payload: &[u8],
    ) -> Result<()> {
        for id in 1..self.rules.len() {
            let State::Bound(test) = &self.rules[id].state else {
                continue;
            };
            let time = time.unwrap_or(now);
            if test.source == source
                && test
                    .pred
                    .eval(&|c: usize| test.columns[c].value(time, payload))
            {
                self.fire(store, id, now, time)?;
            }
        }
        Ok(())
    }

    /// SIGUSR2 or `weft trigger [--note TEXT]`: keeps the window around
    /// now.
    pub fn manual(&mut self, store: &mut Store, note: Option<String>) -> Result<()> {
        let now = weft_store::now_ns();
        if let Some(note) = note.filter(|n| !n.is_empty()) {
            self.notes.push((now, note));
        }
        self.fire(store, 0, now, now)
    }

    fn fire(&mut self, store: &mut Store, id: usize, now: u64, time: u64) -> Result<()> {
        let Policy {
            before,
            after,
            limit,
        } = self.policy;
        let rule = &mut self.rules[id];
        let window = (now.saturating_sub(before), now + after);
        if let Some(current) = &mut rule.window
            && window.0 <= current.1
        {
            current.1 = window.1;
            rule.merged += 1;
            self.pending = Some(*current);
            return Ok(());
        }
        if let Some((most, per)) = limit {
            while rule.recent.front().is_some_and(|t| t + per <= now) {
                rule.recent.pop_front();
            }
            if rule.recent.len() >= most {
                rule.suppressed += 1;
                return Ok(());
            }
            rule.recent.push_back(now);
        }
        rule.window = Some(window);
        rule.fired += 1;
        eprintln!(
            "weft: trigger {id} ({}) fired: keeping {:.1}s before and {:.1}s after",
            rule.text,
            before as f64 / 1e9,
            after as f64 / 1e9
        );
        store.pin(window.0, window.1)?;
        let log = match self.log {
            Some(log) => log,
            None => *self.log.insert(define_log(store)?),
        };
        let record: Vec<u8> = [id as u64, window.0, window.1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        store.append_at(log, now, Some(time), &record)?;
        if let Some((command, dir)) = &self.hook {
            let note = if id == 0 {
                self.notes.last().map(|(_, n)| n.as_str())
            } else {
                None
            };
            run_hook(
                command,
                dir,
                id,
                &self.rules[id].text,
                time,
                window,
                note.unwrap_or_default(),
            );
        }
        Ok(())
    }

    /// Writes the extension of a window that matches stretched.
    pub fn tick(&mut self, store: &mut Store) -> Result<()> {
        if let Some((start, end)) = self.pending.take() {
            store.pin(start, end)?;
        }
        Ok(())
    }

    /// Each trigger and what it did, for `weft.json`.
    pub fn to_json(&self) -> Value {
        let rules: Vec<Value> = self
            .rules
            .iter()
            .enumerate()
            .map(|(id, r)| {
                json!({
                    "id": id,
                    "condition": r.text,
                    "fired": r.fired,
                    "merged": r.merged,
                    "suppressed": r.suppressed,
                })
            })
            .collect();
        let notes: Vec<Value> = self
            .notes
            .iter()
            .map(|(time, note)| json!({ "time_ns": time, "note": note }))
            .collect();
        json!({
            "keep_before_ns": self.policy.before,
            "keep_after_ns": self.policy.after,
            "rules": rules,
            "notes": notes,
        })
    }
}

/// Runs `command` with `sh -c`, the firing described in its environment;
/// it runs on its own (a thread reaps it), so a slow hook never holds up
/// recording.
fn run_hook(
    command: &str,
    dir: &std::path::Path,
    id: usize,
    condition: &str,
    time: u64,
    window: (u64, u64),
    note: &str,
) {
    let spawned = std::process::Command::new("sh")
        .args(["-c", command])
        .env("WEFT_CAPTURE", dir)
        .env("WEFT_TRIGGER_ID", id.to_string())
        .env("WEFT_TRIGGER_CONDITION", condition)
        .env("WEFT_TRIGGER_TIME_NS", time.to_string())
        .env("WEFT_TRIGGER_START_NS", window.0.to_string())
        .env("WEFT_TRIGGER_END_NS", window.1.to_string())
        .env("WEFT_TRIGGER_NOTE", note)
        .stdin(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(error) => eprintln!("weft: --on-trigger: failed to run sh: {error}"),
    }
}

impl Rule {
    fn new(text: String, state: State) -> Self {
        Self {
            text,
            state,
            recent: VecDeque::new(),
            window: None,
            fired: 0,
            merged: 0,
            suppressed: 0,
        }
    }
}

/// `SOURCE where CONDITION`, bound to the source's columns; `None` when the
/// source is not weft's and not defined yet (an application's).
fn bind(catalog: &weft_query::Catalog, text: &str) -> Result<Option<Test>> {
    let failed = |error: weft_query::Error| anyhow::anyhow!("{}", error.render(text));
    let query = weft_query::parse(text).map_err(failed)?;
    if !query.stages.is_empty() || query.window.is_some() || query.correlate.is_some() {
        bail!("a trigger is `SOURCE where CONDITION`, without stages, windows or correlation");
    }
    let Some(cond) = &query.filter else {
        bail!(
            "a trigger needs a condition: `{} where ...`",
            query.source.text
        );
    };
    let name = &query.source.text;
    let Some(source) = catalog.source(name) else {
        if crate::app::is_weft_source(name) {
            bail!("this recording has no source `{name}` (see --sources)");
        }
        return Ok(None);
    };
    let pred = weft_query::bind::bind(source, cond).map_err(failed)?;
    if has_threshold(&pred) {
        bail!(
            "percentile thresholds (`> p99`) are not supported in triggers yet: use a fixed value"
        );
    }
    Ok(Some(Test {
        source: source.id,
        pred,
        columns: source.columns.clone(),
    }))
}

fn has_threshold(pred: &Pred) -> bool {
    match pred {
        Pred::And(all) | Pred::Or(all) => all.iter().any(has_threshold),
        Pred::Not(p) => has_threshold(p),
        Pred::Threshold { .. } => true,
        Pred::Compare { .. } | Pred::In { .. } => false,
    }
}

/// The trigger log: which trigger, and the window it kept (arrival times);
/// the record's time is the matching record's own.
fn define_log(store: &mut Store) -> Result<SourceId> {
    let fields = ["trigger", "start", "end"]
        .iter()
        .zip(0u32..)
        .map(|(name, i)| Field::new(name, i * 8, FieldKind::U64))
        .collect();
    Ok(store.define_source(TRIGGERS, fields)?)
}

#[cfg(test)]
mod tests {
    use weft_probes::syscall::SyscallEvent;

    use super::*;

    const MS: u64 = 1_000_000;

    fn getppid(exit_ns: u64) -> [u8; size_of::<SyscallEvent>()] {
        SyscallEvent {
            enter_ns: exit_ns - 1000,
            duration_ns: 1000,
            ret: 1,
            pid: 7,
            tid: 7,
            nr: 110,
            cpu: 0,
        }
        .to_le_bytes()
    }

    #[test]
    fn matches_fire_merge_and_are_limited() {
        let dir = std::env::temp_dir().join(format!("weft-trigger-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir, &weft_store::Config::default()).unwrap();
        let syscalls = capture::define_syscall_source(&mut store).unwrap();
        let policy = Policy {
            before: MS,
            after: MS,
            limit: Some((2, 3600 * 1000 * MS)),
        };
        let texts = [r#"syscalls where name = "getppid""#.to_owned()];
        let mut triggers = Triggers::new(&store, &Value::Null, &texts, policy, None).unwrap();
        // Fires; inside its window (merged, extended); fires again after
        // it; then the limit of 2 refuses the rest.
        for arrival in [100 * MS, 100 * MS + MS / 2, 200 * MS, 300 * MS, 400 * MS] {
            let record = getppid(arrival);
            store
                .append_at(syscalls, arrival, Some(arrival), &record)
                .unwrap();
            triggers
                .check(&mut store, syscalls, arrival, Some(arrival), &record)
                .unwrap();
        }
        triggers.tick(&mut store).unwrap();
        let rule = &triggers.to_json()["rules"][1];
        assert_eq!(
            (&rule["fired"], &rule["merged"], &rule["suppressed"]),
            (&json!(2), &json!(1), &json!(2))
        );
        assert_eq!(
            store.meta().pins,
            [(99 * MS, 101 * MS + MS / 2), (199 * MS, 201 * MS)],
            "the merged window extends its pin"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn triggers_are_source_where_condition_with_fixed_values() {
        let dir = std::env::temp_dir().join(format!("weft-trigger-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir, &weft_store::Config::default()).unwrap();
        capture::define_syscall_source(&mut store).unwrap();
        let policy = Policy {
            before: MS,
            after: MS,
            limit: None,
        };
        let error = |text: &str| {
            let texts = [text.to_owned()];
            match Triggers::new(&store, &Value::Null, &texts, policy, None) {
                Ok(_) => panic!("{text} was accepted"),
                Err(error) => format!("{error:#}"),
            }
        };
        assert!(error("syscalls | count").contains("without stages"));
        assert!(error("syscalls").contains("needs a condition"));
        assert!(error("syscalls where dur > p99").contains("percentile thresholds"));
        assert!(error("syscalls where bogus = 1").contains("bogus"));
        assert!(error("sched where runq > 1ms").contains("no source `sched`"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
