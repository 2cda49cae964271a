//! `| explain`: where the selected calls' wall time went.
//!
//! Each call (a record with a thread and a duration, such as a syscall) is
//! split, on its own thread, into time on the CPU, in the run queue, and off
//! the CPU by why: sleeping, waiting for block I/O (uninterruptible while a
//! request is in flight), filling page-cache misses (uninterruptible in a
//! call that added pages to the cache), uninterruptible with no I/O in
//! flight, and other states. The `sched` source gives each stretch off the
//! CPU (it ends at its switch-in, inside the call: a thread runs to enter
//! and to leave a call), `block` the requests in flight, `pagecache` the
//! pages a call added. The same split over the same selection without its
//! threshold (the baseline) ranks the factors by how much more of the time
//! they take in the selected calls.

use std::{collections::HashMap, ops::RangeInclusive};

use crate::{
    answer::{Answer, Cell, Header},
    ast::{Agg, Cond, Func, Op, Query, Stage, Time, Value, Window},
    catalog::{Kind, SourceColumns},
    engine::{Engine, Near, merge},
    error::{Error, Result, Span},
    shape::show,
};

/// Calls kept per side: past it, an even sample of them (every 2nd, 4th,
/// ...), so that a baseline of millions of calls holds a bounded list.
const MAX_CALLS: usize = 1 << 17;

/// Stretches of the window a large baseline is read from.
const SLICES: u64 = 64;

/// Where a call's time went, in the order the answer lists them on a tie.
const FACTORS: [&str; 7] = [
    "run-queue wait",
    "page-cache misses",
    "block I/O",
    "sleeping",
    "uninterruptible, no I/O",
    "off-CPU, other states",
    "on-CPU",
];

/// One call: its thread and its span.
#[derive(Clone, Copy, Debug)]
struct Call {
    tid: i64,
    start: u64,
    end: u64,
}

/// The calls a selection picked: all of them, or an even sample.
struct Calls {
    list: Vec<Call>,
    /// How many the selection picked.
    picked: u64,
    /// Every `stride`-th was kept.
    stride: u64,
}

/// A call's time off the CPU, as the `sched` stretches inside it say.
#[derive(Clone, Copy, Default)]
struct Off {
    runq: u64,
    sleep: u64,
    other: u64,
    /// Uninterruptible, before splitting by what was in flight.
    uninterruptible: u64,
    /// Pages the call added to the page cache.
    pages: u64,
}

/// The `sched` source and its columns `explain` reads.
#[derive(Clone, Copy)]
struct SchedColumns<'a> {
    source: &'a SourceColumns,
    tid: usize,
    off_cpu: usize,
    runq: usize,
    state: usize,
}

impl<'a> SchedColumns<'a> {
    fn of(source: &'a SourceColumns, span: Span) -> Result<Self> {
        let column = |name: &str| {
            source.column(name).map(|(i, _)| i).ok_or_else(|| {
                Error::spanned(span, format!("the `sched` source has no `{name}` field"))
            })
        };
        Ok(Self {
            source,
            tid: column("tid")?,
            off_cpu: column("off_cpu")?,
            runq: column("runq")?,
            state: column("state")?,
        })
    }
}

/// A side's time per factor (in [`FACTORS`]' order), summed over its
/// calls, and each factor's share of a call's time summed over the calls
/// that took any (their mean weighs every call alike: a few long calls do
/// not make the baseline look like them).
#[derive(Clone, Default)]
struct Split {
    factors: [u64; 7],
    shares: [f64; 7],
    /// Calls that took time, over which `shares` are summed.
    timed: u64,
    /// Time in the outermost functions a PT capture saw inside the calls:
    /// by function, the shares of a call's time summed, and the ns.
    code: HashMap<String, (f64, u64)>,
    wall: u64,
    calls: u64,
    pages: u64,
}

/// Merged spans in which block requests were in flight.
#[derive(Default)]
struct InFlight {
    any: Vec<(u64, u64)>,
    reads: Vec<(u64, u64)>,
}

/// Why a thread left the CPU, as the `sched` source's `state` names it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Left {
    Runnable,
    Sleeping,
    Uninterruptible,
    Other,
}

fn left(state: &str) -> Left {
    match state {
        "R" | "R+" => Left::Runnable,
        "S" => Left::Sleeping,
        "D" => Left::Uninterruptible,
        _ => Left::Other,
    }
}

impl<'a> Engine<'a> {
    /// Answers `q`, whose only stage is `explain` at `span`.
    pub(crate) fn explain(&mut self, q: &Query, span: Span) -> Result<Answer> {
        if q.stages.len() != 1 {
            return Err(Error::spanned(
                span,
                "`explain` is the only stage of its query: it takes the selected calls as they are",
            ));
        }
        let sched = self.catalog.source("sched").ok_or_else(|| {
            Error::spanned(
                span,
                "`explain` splits calls with the `sched` source, which this capture lacks \
                 (record with `--sources syscalls,sched,block,pagecache`)",
            )
        })?;
        let sched = SchedColumns::of(sched, span)?;
        let window = self.window(q.window.as_ref(), &q.source)?;
        let slow = self.calls(q, span)?;
        let duration = self.source(&q.source)?.span.clone();
        let (baseline, dropped) = without_threshold(q, duration.as_deref());
        let all = self.baseline_calls(&baseline, span, &window)?;
        self.plan.push(if dropped {
            format!(
                "explain: {} selected call(s) against {} without the threshold",
                slow.picked, all.picked
            )
        } else {
            format!(
                "explain: {} selected call(s); the query has no threshold to drop, so the \
                 baseline is the selection itself",
                slow.picked
            )
        });
        let slow_split = self.split(&slow, &sched, &window)?;
        let all_split = self.split(&all, &sched, &window)?;
        for (side, calls, split) in [
            ("selected", &slow, &slow_split),
            ("baseline", &all, &all_split),
        ] {
            self.plan.push(format!(
                "explain: {side}: {} call(s) split{}; {:.1} pages added to the page cache per call",
                split.calls,
                if calls.stride > 1 {
                    format!(" (about 1 in {} of {})", calls.stride, calls.picked)
                } else {
                    String::new()
                },
                per_call_pages(split)
            ));
        }
        Ok(answer(&slow, &slow_split, &all, &all_split))
    }

    /// The calls of the baseline `q`. Past [`MAX_CALLS`] of them, those of
    /// [`SLICES`] evenly spaced stretches of the window that together should
    /// hold about twice as many (read, not the whole window: a baseline of
    /// 30 M calls is sampled in milliseconds), then evened out as any side;
    /// if those stretches hold too few (calls in bursts), all are read.
    fn baseline_calls(
        &mut self,
        q: &Query,
        span: Span,
        window: &RangeInclusive<u64>,
    ) -> Result<Calls> {
        let mut count = q.clone();
        count.stages = vec![Stage::Aggregate {
            aggs: vec![Agg {
                func: Func::Count,
                field: None,
                span,
            }],
            by: Vec::new(),
            every: None,
        }];
        let total = match self.query(&count)?.rows.first().map(|r| &r[0]) {
            Some(Cell::Int(n)) => n.unsigned_abs(),
            _ => 0,
        };
        let (from, to) = (
            (*window.start()).max(self.first),
            (*window.end()).min(self.now),
        );
        if total <= MAX_CALLS as u64 || to <= from {
            return self.calls(q, span);
        }
        let slice = (to - from) / SLICES;
        let read = u64::try_from(u128::from(slice) * 2 * MAX_CALLS as u128 / u128::from(total))
            .unwrap_or(slice);
        let plan = self.plan.len();
        let mut calls = Calls {
            list: Vec::new(),
            picked: total,
            stride: 1,
        };
        for i in 0..SLICES {
            let start = from + i * slice;
            let mut part = q.clone();
            part.window = Some(Window::Range(
                Time::Monotonic(start),
                Time::Monotonic(start + read.max(1)),
            ));
            calls.list.extend(self.calls(&part, span)?.list);
        }
        self.plan.truncate(plan);
        if calls.list.len() < MAX_CALLS / 8 {
            self.plan.push(format!(
                "explain: baseline: {SLICES} stretches of {} held {} of {total} calls: all are read",
                crate::answer::duration(read as f64),
                calls.list.len()
            ));
            return self.calls(q, span);
        }
        self.plan.push(format!(
            "explain: baseline: {} of {total} calls, from {SLICES} stretches of {} spread over the window",
            calls.list.len(),
            crate::answer::duration(read as f64),
        ));
        // As `calls` leaves a side: evened out, sorted by thread and start.
        while calls.list.len() >= MAX_CALLS {
            halve(&mut calls.list);
        }
        calls.stride = total / calls.list.len() as u64;
        calls.list.sort_unstable_by_key(|c| (c.tid, c.start));
        Ok(calls)
    }

    /// The calls `q` selects, each with its thread and span.
    fn calls(&mut self, q: &Query, span: Span) -> Result<Calls> {
        let mut head = q.clone();
        head.stages.clear();
        let selection = self.select(&head, false)?;
        let source = selection.source;
        let lacks = |what: &str| {
            Error::spanned(
                span,
                format!(
                    "`explain` needs records with a thread and a duration; `{}` records have no {what}",
                    source.name
                ),
            )
        };
        let (tid, _) = source.column("tid").ok_or_else(|| lacks("`tid`"))?;
        let duration = source.span.as_ref().ok_or_else(|| lacks("duration"))?;
        let (duration, _) = source.column(duration).ok_or_else(|| lacks("duration"))?;
        let plan = self.plan_scan(source, selection.pred, "explain: calls");
        let mut calls = Calls {
            list: Vec::new(),
            picked: 0,
            stride: 1,
        };
        self.scan(
            source,
            &selection.window,
            &plan,
            selection.near.as_ref(),
            &mut |time, _, payload| {
                let value = |c: usize| source.columns[c].value(time, payload);
                let (Some(tid), Some(dur)) = (value(tid), value(duration)) else {
                    return;
                };
                calls.picked += 1;
                if !(calls.picked - 1).is_multiple_of(calls.stride) {
                    return;
                }
                calls.list.push(Call {
                    tid,
                    start: time.saturating_sub(dur.unsigned_abs()),
                    end: time,
                });
                if calls.list.len() >= MAX_CALLS {
                    halve(&mut calls.list);
                    calls.stride *= 2;
                }
            },
        )?;
        calls.list.sort_unstable_by_key(|c| (c.tid, c.start));
        Ok(calls)
    }

    /// Splits `calls`' time by factor.
    fn split(
        &mut self,
        calls: &Calls,
        sched: &SchedColumns<'a>,
        window: &RangeInclusive<u64>,
    ) -> Result<Split> {
        let mut off = vec![Off::default(); calls.list.len()];
        // Uninterruptible stretches, split by what was in flight once the
        // block requests are known.
        let mut waits: Vec<(usize, u64, u64)> = Vec::new();
        self.off_cpu(calls, sched, window, &mut off, &mut waits)?;
        let in_flight = self.in_flight(calls, window)?;
        self.pages_added(calls, window, &mut off)?;
        let mut split = Split {
            code: self.in_code(calls, window)?,
            ..Split::default()
        };
        // Per call: uninterruptible time with any request in flight, and
        // with only writes (or other requests) in flight.
        let mut io = vec![(0u64, 0u64); calls.list.len()];
        for &(call, from, to) in &waits {
            let any = overlap(&in_flight.any, from, to);
            io[call].0 += any;
            io[call].1 += any - overlap(&in_flight.reads, from, to);
        }
        for (i, call) in calls.list.iter().enumerate() {
            let o = off[i];
            let wall = call.end - call.start;
            let (any, writes) = io[i];
            // A call that added pages to the cache waited for them to be
            // read (or for reads the capture did not see), save while only
            // writes were in flight; another call waited for block I/O
            // while any request was.
            let (miss, disk) = if o.pages > 0 {
                let disk = writes.min(o.uninterruptible);
                (o.uninterruptible - disk, disk)
            } else {
                (0, any.min(o.uninterruptible))
            };
            let parts = [
                o.runq,
                miss,
                disk,
                o.sleep,
                o.uninterruptible - miss - disk,
                o.other,
            ];
            let away: u64 = parts.iter().sum();
            let on_cpu = wall.saturating_sub(away);
            for (i, part) in parts.into_iter().chain([on_cpu]).enumerate() {
                split.factors[i] += part;
                if wall > 0 {
                    split.shares[i] += part as f64 / wall as f64;
                }
            }
            split.timed += u64::from(wall > 0);
            split.wall += wall;
            split.pages += o.pages;
        }
        split.calls = calls.list.len() as u64;
        Ok(split)
    }

    /// Adds each `sched` stretch off the CPU to the call it lies in: its
    /// run-queue part to `runq`, the rest by why the thread left; the
    /// uninterruptible stretches also to `waits`.
    fn off_cpu(
        &mut self,
        calls: &Calls,
        sched: &SchedColumns<'a>,
        window: &RangeInclusive<u64>,
        off: &mut [Off],
        waits: &mut Vec<(usize, u64, u64)>,
    ) -> Result<()> {
        let SchedColumns {
            source: sched,
            tid,
            off_cpu,
            runq,
            state,
        } = *sched;
        let near = near(calls, Some(tid));
        let scan = self.plan_scan(sched, None, "explain: sched during the calls");
        let mut states: HashMap<i64, Left> = HashMap::new();
        let kind = sched.columns[state].kind.clone();
        self.scan(
            sched,
            window,
            &scan,
            Some(&near),
            &mut |time, _, payload| {
                let value = |c: usize| sched.columns[c].value(time, payload);
                let (Some(t), Some(away), Some(queued), Some(s)) =
                    (value(tid), value(off_cpu), value(runq), value(state))
                else {
                    return;
                };
                let Some(i) = call_at(&calls.list, t, time) else {
                    return;
                };
                let call = calls.list[i];
                let left = *states.entry(s).or_insert_with(|| left(&show(&kind, s)));
                let back = time;
                let queued_from = back.saturating_sub(queued.unsigned_abs());
                let out = back.saturating_sub(away.unsigned_abs()).min(queued_from);
                let o = &mut off[i];
                o.runq += clip(queued_from, back, call);
                let waited = clip(out, queued_from, call);
                match left {
                    // A preempted thread waits in the run queue from its switch-out.
                    Left::Runnable => o.runq += waited,
                    Left::Sleeping => o.sleep += waited,
                    Left::Other => o.other += waited,
                    Left::Uninterruptible => {
                        o.uninterruptible += waited;
                        waits.push((i, out.max(call.start), queued_from.min(call.end)));
                    }
                }
            },
        )?;
        Ok(())
    }

    /// The spans in which a block request that completed during one of
    /// the calls was in flight (any thread's: a call may wait on writeback
    /// or a journal another thread issued).
    fn in_flight(&mut self, calls: &Calls, window: &RangeInclusive<u64>) -> Result<InFlight> {
        let Some(block) = self.catalog.source("block") else {
            self.plan.push(
                "explain: no `block` source: uninterruptible time is not split by I/O".into(),
            );
            return Ok(InFlight::default());
        };
        let Some((latency, _)) = block.column("latency") else {
            return Ok(InFlight::default());
        };
        // Reads, by the request's operation where the source names it.
        let op = block.column("op").map(|(i, column)| match &column.kind {
            Kind::Named(names) => (i, names.values_where(|name| name == "read")),
            _ => (i, Vec::new()),
        });
        let near = near(calls, None);
        let plan = self.plan_scan(block, None, "explain: block requests during the calls");
        let (mut any, mut reads) = (Vec::new(), Vec::new());
        self.scan(
            block,
            window,
            &plan,
            Some(&near),
            &mut |time, _, payload| {
                let value = |c: usize| block.columns[c].value(time, payload);
                let Some(l) = value(latency) else {
                    return;
                };
                let busy = (time.saturating_sub(l.unsigned_abs()), time);
                any.push(busy);
                if let Some((op, read)) = &op
                    && value(*op).is_some_and(|v| read.contains(&v))
                {
                    reads.push(busy);
                }
            },
        )?;
        Ok(InFlight {
            any: merge(any),
            reads: merge(reads),
        })
    }

    /// The time of each call spent in the outermost functions that a PT
    /// capture (the `calls` source) saw return inside it, by function.
    fn in_code(
        &mut self,
        calls: &Calls,
        window: &RangeInclusive<u64>,
    ) -> Result<HashMap<String, (f64, u64)>> {
        let mut code = HashMap::new();
        let Some(pt) = self.catalog.source("calls") else {
            return Ok(code);
        };
        let column = |name: &str| pt.column(name).map(|(i, _)| i);
        let (Some(tid), Some(dur), Some(depth), Some(func)) = (
            column("tid"),
            column("dur"),
            column("depth"),
            column("func"),
        ) else {
            return Ok(code);
        };
        let near = near(calls, Some(tid));
        let plan = self.plan_scan(pt, None, "explain: PT calls during the calls");
        // Per call: the outermost depth seen, and its functions' time.
        let mut found: HashMap<usize, (i64, Vec<(i64, u64)>)> = HashMap::new();
        self.scan(pt, window, &plan, Some(&near), &mut |time, _, payload| {
            let value = |c: usize| pt.columns[c].value(time, payload);
            let (Some(t), Some(d), Some(level), Some(f)) =
                (value(tid), value(dur), value(depth), value(func))
            else {
                return;
            };
            let Some(i) = call_at(&calls.list, t, time) else {
                return;
            };
            let ns = clip(time.saturating_sub(d.unsigned_abs()), time, calls.list[i]);
            let (outermost, funcs) = found.entry(i).or_insert((level, Vec::new()));
            if level < *outermost {
                *outermost = level;
                funcs.clear();
            }
            if level == *outermost {
                funcs.push((f, ns));
            }
        })?;
        let kind = pt.columns[func].kind.clone();
        for (i, (_, funcs)) in found {
            let wall = calls.list[i].end - calls.list[i].start;
            for (f, ns) in funcs {
                let entry = code.entry(show(&kind, f)).or_insert((0.0, 0));
                if wall > 0 {
                    entry.0 += ns as f64 / wall as f64;
                }
                entry.1 += ns;
            }
        }
        Ok(code)
    }

    /// Adds the pages each call added to the page cache (its misses).
    fn pages_added(
        &mut self,
        calls: &Calls,
        window: &RangeInclusive<u64>,
        off: &mut [Off],
    ) -> Result<()> {
        let Some(cache) = self.catalog.source("pagecache") else {
            self.plan
                .push("explain: no `pagecache` source: misses are not told apart".into());
            return Ok(());
        };
        let (Some((tid, _)), Some((kind, column)), Some((pages, _))) = (
            cache.column("tid"),
            cache.column("kind"),
            cache.column("pages"),
        ) else {
            return Ok(());
        };
        let add = match &column.kind {
            Kind::Named(names) => names.values_where(|name| name == "add"),
            _ => Vec::new(),
        };
        let near = near(calls, Some(tid));
        let scan = self.plan_scan(cache, None, "explain: page-cache adds during the calls");
        self.scan(
            cache,
            window,
            &scan,
            Some(&near),
            &mut |time, _, payload| {
                let value = |c: usize| cache.columns[c].value(time, payload);
                let (Some(t), Some(k), Some(n)) = (value(tid), value(kind), value(pages)) else {
                    return;
                };
                if let (true, Some(i)) = (add.contains(&k), call_at(&calls.list, t, time)) {
                    off[i].pages += n.unsigned_abs();
                }
            },
        )?;
        Ok(())
    }
}

/// Keeps every other call (the 1st, 3rd, ...): an even sample of half.
fn halve(list: &mut Vec<Call>) {
    let mut i = 0;
    list.retain(|_| {
        i += 1;
        i % 2 == 1
    });
}

/// The calls' spans for a scan by the records' own time: per thread where
/// `tid` is the scanned source's thread column, else all together.
fn near(calls: &Calls, tid: Option<usize>) -> Near {
    let spans = || calls.list.iter().map(|c| (c.start, c.end));
    let mut by_key: HashMap<Vec<i64>, Vec<(u64, u64)>> = HashMap::new();
    match tid {
        Some(_) => {
            for call in &calls.list {
                by_key
                    .entry(vec![call.tid])
                    .or_default()
                    .push((call.start, call.end));
            }
        }
        None => {
            by_key.insert(Vec::new(), spans().collect());
        }
    }
    Near {
        all: merge(spans().collect()),
        by_key: by_key.into_iter().map(|(k, v)| (k, merge(v))).collect(),
        same: tid.into_iter().collect(),
        by_arrival: false,
    }
}

/// The call of thread `tid` (calls sorted by thread and start) whose span
/// holds `time`.
fn call_at(calls: &[Call], tid: i64, time: u64) -> Option<usize> {
    let i = calls.partition_point(|c| (c.tid, c.start) <= (tid, time));
    let call = calls.get(i.checked_sub(1)?)?;
    (call.tid == tid && time <= call.end).then_some(i - 1)
}

/// How much of `from..to` lies in `call`.
fn clip(from: u64, to: u64, call: Call) -> u64 {
    to.min(call.end).saturating_sub(from.max(call.start))
}

/// How much of `from..to` the sorted, disjoint `spans` cover.
fn overlap(spans: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let first = spans.partition_point(|(_, hi)| *hi < from);
    spans[first..]
        .iter()
        .take_while(|(lo, _)| *lo < to)
        .map(|(lo, hi)| (*hi).min(to).saturating_sub((*lo).max(from)))
        .sum()
}

/// `q` without its threshold: the top-level conditions that compare with
/// a percentile or bound the calls' duration dropped. Whether any was.
fn without_threshold(q: &Query, duration: Option<&str>) -> (Query, bool) {
    let keep = |cond: &Cond| {
        !matches!(
            cond,
            Cond::Compare { value, .. } if matches!(value.value, Value::Percentile(_))
        ) && !matches!(
            cond,
            Cond::Compare { field, op: Op::Gt | Op::Ge, .. } if Some(field.text.as_str()) == duration
        )
    };
    let mut base = q.clone();
    base.stages.clear();
    let Some(filter) = base.filter.take() else {
        return (base, false);
    };
    let mut all = Vec::new();
    conjuncts(filter, &mut all);
    let before = all.len();
    all.retain(keep);
    let dropped = all.len() < before;
    base.filter = all
        .into_iter()
        .reduce(|a, b| Cond::And(Box::new(a), Box::new(b)));
    (base, dropped)
}

/// The top-level conditions of `cond`.
fn conjuncts(cond: Cond, out: &mut Vec<Cond>) {
    match cond {
        Cond::And(a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        other => out.push(other),
    }
}

/// The factors ranked by how much more of a call's time they take in the
/// selected calls than in the baseline, then the calls' wall time.
fn answer(slow: &Calls, s: &Split, all: &Calls, a: &Split) -> Answer {
    let share = |i: usize, split: &Split| {
        if split.timed == 0 {
            0.0
        } else {
            split.shares[i] * 100.0 / split.timed as f64
        }
    };
    let per_call = |part: u64, split: &Split| {
        if split.calls == 0 {
            Cell::Null
        } else {
            Cell::Float(part as f64 / split.calls as f64)
        }
    };
    let mut rows: Vec<(f64, Vec<Cell>)> = FACTORS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (x, y) = (share(i, s), share(i, a));
            let row = vec![
                Cell::Text((*name).to_owned()),
                Cell::Float(x),
                Cell::Float(y),
                Cell::Float(x - y),
                per_call(s.factors[i], s),
                per_call(a.factors[i], a),
            ];
            (x - y, row)
        })
        .collect();
    // Stable: a tie keeps `FACTORS`' order.
    rows.sort_by(|x, y| y.0.total_cmp(&x.0));
    let mut rows: Vec<Vec<Cell>> = rows.into_iter().map(|(_, row)| row).collect();
    rows.push(vec![
        Cell::Text(format!(
            "wall time ({} calls, {} in the baseline)",
            slow.picked, all.picked
        )),
        Cell::Float(100.0),
        Cell::Float(100.0),
        Cell::Float(0.0),
        per_call(s.wall, s),
        per_call(a.wall, a),
    ]);
    rows.extend(code_rows(s, a));
    let header = |name: &str, kind: Kind| Header {
        name: name.into(),
        kind,
    };
    Answer {
        columns: vec![
            header("factor", Kind::Int),
            header("selected_pct", Kind::Int),
            header("baseline_pct", Kind::Int),
            header("change_pts", Kind::Int),
            header("selected_per_call", Kind::Duration),
            header("baseline_per_call", Kind::Duration),
        ],
        rows,
        ..Answer::default()
    }
}

/// Functions PT saw the selected calls in (the outermost ones inside
/// each call), after the factors: `in code: FUNC`, the ten that gained
/// most. Their time is on or off the CPU alike, so they rank apart.
fn code_rows(s: &Split, a: &Split) -> Vec<Vec<Cell>> {
    let share = |split: &Split, name: &str| {
        split
            .code
            .get(name)
            .filter(|_| split.timed > 0)
            .map_or(0.0, |(sum, _)| sum * 100.0 / split.timed as f64)
    };
    let per_call = |split: &Split, name: &str| {
        let ns = split.code.get(name).map_or(0, |(_, ns)| *ns);
        if split.calls == 0 {
            Cell::Null
        } else {
            Cell::Float(ns as f64 / split.calls as f64)
        }
    };
    let mut names: Vec<&String> = s.code.keys().collect();
    names.sort_by(|x, y| {
        let gain = |n: &str| share(s, n) - share(a, n);
        gain(y).total_cmp(&gain(x)).then(x.cmp(y))
    });
    names
        .into_iter()
        .take(10)
        .map(|name| {
            let (x, y) = (share(s, name), share(a, name));
            vec![
                Cell::Text(format!("in code: {name}")),
                Cell::Float(x),
                Cell::Float(y),
                Cell::Float(x - y),
                per_call(s, name),
                per_call(a, name),
            ]
        })
        .collect()
}

/// Pages a side's calls added to the page cache, per call.
fn per_call_pages(split: &Split) -> f64 {
    if split.calls == 0 {
        0.0
    } else {
        split.pages as f64 / split.calls as f64
    }
}
