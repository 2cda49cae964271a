//! The asker's side of a fleet query: every host's groups merged, each
//! quantile's bin picked from the merged bin counts, then made exact by
//! asking the hosts only for their values inside that bin (narrowed in
//! rounds while a bin holds too many values to send).

use std::collections::{BTreeMap, HashMap};

use crate::{
    aggregate::{Acc, PERCENTILES},
    answer::{Answer, Cell, Header},
    ast::{Correlate, Func, Name, Query, Stage},
    error::{Error, Result},
    fleet::wire::{
        Anchor, Ask, Key, Part, Reply, Request, Shown, Slice, Want, piece_of, piece_range,
    },
    parse::parse,
    shape::{compare_cells, reshape},
};

/// One host a fleet query asks: a capture directory read here, or a
/// recorder at a peer address.
pub trait Host {
    /// The host's name in answers and explanations.
    fn name(&self) -> &str;

    /// The host's reply to `request`, and how many bytes it sent.
    fn ask(&mut self, request: &Request) -> Result<(Reply, u64)>;
}

/// What one host sent for a fleet query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// The host's name.
    pub host: String,
    /// Requests it answered.
    pub asks: u32,
    /// Bytes it sent.
    pub bytes: u64,
    /// Records its scans visited (the most of any one ask).
    pub scanned: u64,
    /// Their payload bytes.
    pub scanned_bytes: u64,
    /// Records its answer covers: what shipping them would have meant.
    pub covered: u64,
}

/// A fleet query's answer and what each host sent for it.
#[derive(Debug)]
pub struct FleetAnswer {
    /// The answer, as one capture holding every host's records would give.
    pub answer: Answer,
    /// Per host, in the order asked.
    pub traffic: Vec<Traffic>,
    /// Rounds of value requests the exact quantiles took.
    pub rounds: u32,
}

/// Rounds of narrowing after which a quantile gives up: eight rounds
/// narrow any `i64` range to one value, so more means the hosts' records
/// changed under the query.
const MAX_ROUNDS: u32 = 12;

/// Answers `text` over `hosts`: exact, as if one capture held every
/// host's records. Each host sends mergeable aggregates, then only the
/// values inside the bins its quantiles fall in. `host` in a `by` list
/// groups by the host each record came from: each host is then asked alone
/// and its rows carry its name.
pub fn answer(text: &str, hosts: &mut [&mut dyn Host]) -> Result<FleetAnswer> {
    let query = parse(text)?;
    let funcs = stage_funcs(&query)?;
    let (anchors, anchor_traffic) = match &query.correlate {
        Some(correlate) => {
            let (anchors, traffic) = fleet_anchors(text, correlate, hosts)?;
            (Some(anchors), traffic)
        }
        None => (None, Vec::new()),
    };
    let asked = Asked {
        text,
        scan: false,
        anchors: anchors.as_ref(),
    };
    let Merged {
        mut answer,
        keys,
        mut traffic,
        rounds,
        groups,
    } = match by_host(&query, text)? {
        Some((at, without)) => per_host(
            &Asked {
                text: &without,
                ..asked
            },
            hosts,
            &funcs,
            at,
        )?,
        None => merged(&asked, hosts, &funcs)?,
    };
    for (mine, theirs) in traffic.iter_mut().zip(&anchor_traffic) {
        mine.asks += theirs.asks;
        mine.bytes += theirs.bytes;
    }
    let by = keys > 0 && !matches!(answer.columns[0].kind, crate::catalog::Kind::Time);
    let hist = funcs.first() == Some(&Func::Hist);
    if by && !hist {
        answer
            .rows
            .sort_by(|a, b| compare_cells(&b[keys], &a[keys]));
    }
    for stage in after_stages(&query, &answer.columns[keys].name) {
        reshape(&mut answer, &stage)?;
    }
    answer.plan = plan(&traffic, groups, rounds);
    Ok(FleetAnswer {
        answer,
        traffic,
        rounds,
    })
}

/// The name that groups a fleet query's rows by host.
pub const HOST: &str = "host";

/// Where `host` stands among the answer's key columns, and the query's
/// text without it, if its `by` list names it.
fn by_host(query: &Query, text: &str) -> Result<Option<(usize, String)>> {
    let Some((by, every)) = query.stages.iter().find_map(|s| match s {
        Stage::Aggregate { by, every, .. } => Some((by, every.is_some())),
        Stage::Top { by, .. } => Some((by, false)),
        _ => None,
    }) else {
        return Ok(None);
    };
    let Some(i) = by.iter().position(|name| name.text == HOST) else {
        return Ok(None);
    };
    let cut = if by.len() > 1 {
        // `by a, host, b`: the name and the comma after it (before it, last).
        let (start, end) = if i + 1 < by.len() {
            (by[i].span.start, by[i + 1].span.start)
        } else {
            (
                by[i - 1].span.start + by[i - 1].span.len,
                by[i].span.start + by[i].span.len,
            )
        };
        start..end
    } else if query.stages.iter().any(|s| matches!(s, Stage::Top { .. })) {
        return Err(Error::spanned(
            by[i].span,
            "`top N by host` needs another field to rank within hosts: write `count by host | sort count desc | limit N`",
        ));
    } else {
        // `by host` alone: the keyword goes too.
        let before = &text[..by[i].span.start];
        let keyword = before.trim_end().len() - "by".len();
        keyword..by[i].span.start + by[i].span.len
    };
    let without = format!("{}{}", &text[..cut.start], &text[cut.end..]);
    Ok(Some((usize::from(every) + i, without)))
}

/// A fleet's merged rows before they are sorted and shaped.
struct Merged {
    answer: Answer,
    /// How many of the answer's columns make the key.
    keys: usize,
    traffic: Vec<Traffic>,
    rounds: u32,
    groups: usize,
}

/// Wall-clock intervals, ns since the epoch.
type Spans = Vec<(i64, i64)>;

/// A correlation's anchors over every host, wall-clock ns: all of them for
/// a sub-query that selects records, the fleet's one extreme for `max(x)`
/// or `min(x)`; and what each host sent for them.
fn fleet_anchors(
    text: &str,
    correlate: &Correlate,
    hosts: &mut [&mut dyn Host],
) -> Result<(Spans, Vec<Traffic>)> {
    let extreme = match &correlate.anchors.stages[..] {
        [] => None,
        [
            Stage::Aggregate {
                aggs,
                by,
                every: None,
            },
        ] if by.is_empty() && aggs.len() == 1 && matches!(aggs[0].func, Func::Max | Func::Min) => {
            Some(aggs[0].func == Func::Max)
        }
        _ => {
            return Err(Error::spanned(
                correlate.span,
                "across hosts, a correlation's sub-query selects records (`where ...`) or takes one `max(x)` or `min(x)`",
            ));
        }
    };
    let mut traffic = new_traffic(hosts);
    let asked = Asked {
        text,
        scan: false,
        anchors: None,
    };
    let replies = ask_all(hosts, &mut traffic, &asked, &Ask::Anchors)?;
    let all = replies.into_iter().flat_map(|r| r.anchors);
    let anchors: Vec<Anchor> = match extreme {
        None => all.collect(),
        Some(max) => {
            let valued = all.filter(|a| a.value.is_some());
            let best = if max {
                valued.max_by_key(|a| a.value)
            } else {
                valued.min_by_key(|a| a.value)
            };
            best.into_iter().collect()
        }
    };
    Ok((anchors.iter().map(|a| (a.start, a.end)).collect(), traffic))
}

/// An empty traffic entry per host.
fn new_traffic(hosts: &[&mut dyn Host]) -> Vec<Traffic> {
    hosts
        .iter()
        .map(|h| Traffic {
            host: h.name().to_string(),
            ..Traffic::default()
        })
        .collect()
}

/// Every host's groups of the query, merged, with exact quantiles.
fn merged(asked: &Asked, hosts: &mut [&mut dyn Host], funcs: &[Func]) -> Result<Merged> {
    let mut traffic = new_traffic(hosts);
    let mut partials = ask_all(hosts, &mut traffic, asked, &Ask::Partials)?;
    // Hosts that answered from summaries whose bins differ (another weft
    // version, an index defined otherwise) count in the shared bins
    // instead, from their records.
    let asked = Asked {
        scan: !same_bins(&partials),
        ..*asked
    };
    if asked.scan {
        partials = ask_all(hosts, &mut traffic, &asked, &Ask::Partials)?;
    }
    let (columns, keys) = agreed_columns(hosts, &partials)?;
    for (traffic, reply) in traffic.iter_mut().zip(&partials) {
        traffic.covered = reply
            .groups
            .iter()
            .map(|g| g.parts.iter().map(|p| p.count).max().unwrap_or(0))
            .sum();
    }
    let mut groups: BTreeMap<Vec<Key>, Vec<Part>> = BTreeMap::new();
    for (host, reply) in hosts.iter().zip(&partials) {
        for group in &reply.groups {
            let merged = groups
                .entry(group.key.clone())
                .or_insert_with(|| vec![Part::default(); group.parts.len()]);
            if merged.len() != group.parts.len() || group.key.len() != keys {
                return Err(host_error(
                    host.name(),
                    "sent a group that does not fit the query's columns",
                ));
            }
            for (mine, theirs) in merged.iter_mut().zip(&group.parts) {
                mine.merge(theirs);
            }
        }
    }
    let (quantiles, rounds) = exact_quantiles(hosts, &mut traffic, &asked, &groups, funcs)?;
    Ok(Merged {
        answer: rows(&columns, &groups, funcs, &quantiles),
        keys,
        traffic,
        rounds,
        groups: groups.len(),
    })
}

/// Each host's answer to `text` alone, its name in the key column `at`.
fn per_host(
    asked: &Asked,
    hosts: &mut [&mut dyn Host],
    funcs: &[Func],
    at: usize,
) -> Result<Merged> {
    let mut all: Option<Merged> = None;
    for i in 0..hosts.len() {
        let name = hosts[i].name().to_string();
        let mut one = merged(asked, &mut hosts[i..=i], funcs)?;
        one.answer.columns.insert(
            at,
            Header {
                name: HOST.to_string(),
                kind: Shown::Text.kind(),
            },
        );
        for row in &mut one.answer.rows {
            row.insert(at, Cell::Text(name.clone()));
        }
        one.keys += 1;
        let Some(all) = &mut all else {
            all = Some(one);
            continue;
        };
        let names = |a: &Answer| a.columns.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
        if names(&one.answer) != names(&all.answer) {
            return Err(host_error(
                &name,
                &format!(
                    "answers with other columns than {}: its source's fields differ",
                    all.traffic[0].host
                ),
            ));
        }
        all.answer.rows.append(&mut one.answer.rows);
        all.traffic.append(&mut one.traffic);
        all.rounds = all.rounds.max(one.rounds);
        all.groups += one.groups;
    }
    all.ok_or_else(|| host_error("fleet", "no hosts to ask"))
}

/// Whether every host counted each aggregate's values in the same bins.
fn same_bins(replies: &[Reply]) -> bool {
    let mut seen: HashMap<usize, u64> = HashMap::new();
    for group in replies.iter().flat_map(|r| &r.groups) {
        for (agg, part) in group
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.bins.is_empty())
        {
            if *seen.entry(agg).or_insert(part.scheme) != part.scheme {
                return false;
            }
        }
    }
    true
}

/// The query's text, whether hosts were asked to read their records, and
/// a correlation's anchors over the fleet.
#[derive(Clone, Copy)]
struct Asked<'a> {
    text: &'a str,
    scan: bool,
    anchors: Option<&'a Spans>,
}

/// The functions of the query's aggregate stage, in order.
fn stage_funcs(query: &Query) -> Result<Vec<Func>> {
    query
        .stages
        .iter()
        .find_map(|s| match s {
            Stage::Aggregate { aggs, .. } => Some(aggs.iter().map(|a| a.func).collect()),
            Stage::Top { agg, .. } => Some(vec![agg.func]),
            _ => None,
        })
        .ok_or_else(|| {
            Error::spanned(
                query.source.span,
                "a fleet query aggregates (`| count by comm`, `| p99(dur)`): listing records across hosts is not supported",
            )
        })
}

/// The stages after the aggregate, run on the merged rows: a `top`'s sort
/// by its aggregate (`first_agg`, the first aggregate column) and limit,
/// then the rest.
fn after_stages(query: &Query, first_agg: &str) -> Vec<Stage> {
    let at = query
        .stages
        .iter()
        .position(|s| matches!(s, Stage::Aggregate { .. } | Stage::Top { .. }))
        .expect("stage_funcs found the aggregate");
    let mut stages = Vec::new();
    if let Stage::Top { n, agg, .. } = &query.stages[at] {
        stages.push(Stage::Sort {
            key: Name {
                text: first_agg.to_string(),
                span: agg.span,
            },
            descending: true,
        });
        stages.push(Stage::Limit(*n));
    }
    stages.extend(query.stages[at + 1..].iter().cloned());
    stages
}

/// Sends `ask` to every host, adding what each sent to its traffic.
fn ask_all(
    hosts: &mut [&mut dyn Host],
    traffic: &mut [Traffic],
    asked: &Asked,
    ask: &Ask,
) -> Result<Vec<Reply>> {
    let request = Request {
        query: asked.text.to_string(),
        ask: ask.clone(),
        scan: asked.scan,
        anchors: asked.anchors.cloned(),
    };
    hosts
        .iter_mut()
        .zip(traffic)
        .map(|(host, traffic)| {
            let (reply, bytes) = host.ask(&request)?;
            traffic.asks += 1;
            traffic.bytes += bytes;
            traffic.scanned = traffic.scanned.max(reply.scanned);
            traffic.scanned_bytes = traffic.scanned_bytes.max(reply.scanned_bytes);
            Ok(reply)
        })
        .collect()
}

/// The columns every host answered with, and how many make the key.
fn agreed_columns(
    hosts: &[&mut dyn Host],
    replies: &[Reply],
) -> Result<(Vec<(String, Shown)>, usize)> {
    let first = replies
        .first()
        .ok_or_else(|| host_error("fleet", "no hosts to ask"))?;
    for (host, reply) in hosts.iter().zip(replies) {
        if reply.columns != first.columns || reply.keys != first.keys {
            let names = |r: &Reply| -> String {
                r.columns
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(host_error(
                host.name(),
                &format!(
                    "answers with columns ({}) where {} answers with ({}): its source's fields differ",
                    names(reply),
                    hosts[0].name(),
                    names(first)
                ),
            ));
        }
    }
    Ok((first.columns.clone(), first.keys))
}

/// Exact quantiles found: by group key, aggregate and the quantile's bits.
type Quantiles = HashMap<(Vec<Key>, usize, u64), i64>;

/// One quantile still being narrowed: of aggregate `agg` of group `key`,
/// the `rank`-th smallest value inside `lo..=hi`.
#[derive(Clone, Debug)]
struct Pending {
    key: Vec<Key>,
    agg: usize,
    q: f64,
    lo: i64,
    hi: i64,
    rank: u64,
}

/// Every quantile of every group, exact: `(key, agg, q) -> value`, and the
/// rounds of value requests it took.
fn exact_quantiles(
    hosts: &mut [&mut dyn Host],
    traffic: &mut [Traffic],
    asked: &Asked,
    groups: &BTreeMap<Vec<Key>, Vec<Part>>,
    funcs: &[Func],
) -> Result<(Quantiles, u32)> {
    let mut pending = Vec::new();
    for (key, parts) in groups {
        for (agg, (func, part)) in funcs.iter().zip(parts).enumerate() {
            let qs: &[f64] = match func {
                Func::Quantile(q) => &[*q][..],
                Func::Percentiles => &PERCENTILES[..],
                _ => &[],
            };
            for q in qs {
                if let Some((bin, rank)) = bin_rank(&part.bins, *q) {
                    let (lo, hi) = part.range(bin);
                    pending.push(Pending {
                        key: key.clone(),
                        agg,
                        q: *q,
                        lo,
                        hi,
                        rank,
                    });
                }
            }
        }
    }
    let mut found = HashMap::new();
    let mut rounds = 0;
    loop {
        // A range of one value is the answer, however many hold it.
        pending.retain(|p| {
            let single = p.lo == p.hi;
            if single {
                found.insert((p.key.clone(), p.agg, p.q.to_bits()), p.lo);
            }
            !single
        });
        if pending.is_empty() {
            break;
        }
        rounds += 1;
        if rounds > MAX_ROUNDS {
            return Err(host_error(
                "fleet",
                "the hosts' values kept changing while a quantile was narrowed; ask again",
            ));
        }
        let mut wants: Vec<Want> = pending
            .iter()
            .map(|p| Want {
                key: p.key.clone(),
                agg: p.agg,
                lo: p.lo,
                hi: p.hi,
            })
            .collect();
        wants.sort();
        wants.dedup();
        let replies = ask_all(hosts, traffic, asked, &Ask::Values(wants.clone()))?;
        for (host, reply) in hosts.iter().zip(&replies) {
            if reply.slices.len() != wants.len() {
                return Err(host_error(
                    host.name(),
                    "sent a reply that does not fit the request",
                ));
            }
        }
        let mut next = Vec::new();
        for mut p in pending {
            let w = wants
                .binary_search_by(|w| (&w.key, w.agg, w.lo, w.hi).cmp(&(&p.key, p.agg, p.lo, p.hi)))
                .expect("every pending quantile was wanted");
            let slices: Vec<&Slice> = replies.iter().map(|r| &r.slices[w]).collect();
            if let Some(values) = all_values(&slices) {
                let at = usize::try_from(p.rank - 1)
                    .unwrap_or(usize::MAX)
                    .min(values.len().saturating_sub(1));
                if let Some(v) = values.get(at) {
                    found.insert((p.key, p.agg, p.q.to_bits()), *v);
                }
                continue;
            }
            let counts = piece_counts(&slices, p.lo, p.hi);
            let (piece, before) = rank_in(&counts, p.rank);
            (p.lo, p.hi) = piece_range(p.lo, p.hi, piece);
            p.rank -= before;
            next.push(p);
        }
        pending = next;
    }
    Ok((found, rounds))
}

/// The bin that holds the nearest-rank `q`-quantile of the values counted
/// in `bins`, and its rank inside that bin; `None` with no values.
fn bin_rank(bins: &BTreeMap<i32, u64>, q: f64) -> Option<(i32, u64)> {
    let n: u64 = bins.values().sum();
    if n == 0 {
        return None;
    }
    #[expect(clippy::cast_sign_loss, reason = "q is in 0..=1")]
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut before = 0;
    for (bin, count) in bins {
        if before + count >= rank {
            return Some((*bin, rank - before));
        }
        before += count;
    }
    unreachable!("the rank is at most the total")
}

/// Every host's values, merged in order, if every host sent them.
fn all_values(slices: &[&Slice]) -> Option<Vec<i64>> {
    let mut all = Vec::new();
    for slice in slices {
        let Slice::Values(values) = slice else {
            return None;
        };
        all.extend_from_slice(values);
    }
    all.sort_unstable();
    Some(all)
}

/// How many values of all hosts fall in each piece of `lo..=hi`.
fn piece_counts(slices: &[&Slice], lo: i64, hi: i64) -> Vec<u64> {
    let mut counts = vec![0u64; piece_of(lo, hi, hi) + 1];
    for slice in slices {
        match slice {
            Slice::Values(values) => {
                for v in values.iter().filter(|v| (lo..=hi).contains(*v)) {
                    counts[piece_of(lo, hi, *v)] += 1;
                }
            }
            Slice::Counts(theirs) => {
                for (mine, n) in counts.iter_mut().zip(theirs) {
                    *mine += n;
                }
            }
        }
    }
    counts
}

/// The piece holding the `rank`-th value, and how many values lie before
/// it; the last piece when the values fell short (records that changed).
fn rank_in(counts: &[u64], rank: u64) -> (usize, u64) {
    let mut before = 0;
    for (i, n) in counts.iter().enumerate() {
        if before + n >= rank {
            return (i, before);
        }
        before += n;
    }
    let last = counts.iter().rposition(|n| *n > 0).unwrap_or(0);
    (last, before - counts[last])
}

/// The merged answer's rows, in key order.
fn rows(
    columns: &[(String, Shown)],
    groups: &BTreeMap<Vec<Key>, Vec<Part>>,
    funcs: &[Func],
    quantiles: &Quantiles,
) -> Answer {
    let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
    let mut rows = Vec::new();
    for (key, parts) in groups {
        let key_cells: Vec<Cell> = key
            .iter()
            .map(|k| match k {
                Key::Null => Cell::Null,
                Key::Int(i) => Cell::Int(*i),
                Key::Text(t) => Cell::Text(t.clone()),
            })
            .collect();
        if funcs.first() == Some(&Func::Hist) {
            for row in Acc::with_hist(parts[0].hist.clone()).hist_rows() {
                rows.push(key_cells.iter().cloned().chain(row).collect());
            }
            continue;
        }
        let quantile =
            |agg: usize, q: f64| int(quantiles.get(&(key.clone(), agg, q.to_bits())).copied());
        let mut row = key_cells;
        for (agg, (func, part)) in funcs.iter().zip(parts).enumerate() {
            match func {
                Func::Count => row.push(Cell::Int(part.count.cast_signed())),
                Func::Sum => row.push(Cell::Int(
                    i64::try_from(part.sum).unwrap_or(if part.sum < 0 {
                        i64::MIN
                    } else {
                        i64::MAX
                    }),
                )),
                Func::Min => row.push(int(part.min)),
                Func::Max => row.push(int(part.max)),
                Func::Avg => row.push(if part.count == 0 {
                    Cell::Null
                } else {
                    Cell::Float(part.sum as f64 / part.count as f64)
                }),
                Func::Quantile(q) => row.push(quantile(agg, *q)),
                Func::Percentiles => {
                    row.extend(PERCENTILES.iter().map(|q| quantile(agg, *q)));
                    row.push(int(part.max));
                }
                Func::Hist => {}
            }
        }
        rows.push(row);
    }
    Answer {
        columns: columns
            .iter()
            .map(|(name, shown)| Header {
                name: name.clone(),
                kind: shown.kind(),
            })
            .collect(),
        rows,
        ..Answer::default()
    }
}

/// What `--explain` prints: per host, what it sent against what its
/// records would have cost.
fn plan(traffic: &[Traffic], groups: usize, rounds: u32) -> Vec<String> {
    let mut plan: Vec<String> = traffic
        .iter()
        .map(|t| {
            format!(
                "host {}: {} request(s), sent {} bytes; its answer covers {} records, of which it read {} ({} bytes)",
                t.host, t.asks, t.bytes, t.covered, t.scanned, t.scanned_bytes
            )
        })
        .collect();
    let sent: u64 = traffic.iter().map(|t| t.bytes).sum();
    let records: u64 = traffic.iter().map(|t| t.covered).sum();
    plan.push(format!(
        "fleet: {} host(s), {} group(s) merged, {rounds} round(s) of values for exact quantiles; sent {sent} bytes in all for {records} records",
        traffic.len(),
        groups
    ));
    plan
}

/// An error about one host of a fleet.
fn host_error(host: &str, message: &str) -> Error {
    Error::Host {
        host: host.to_string(),
        message: message.to_string(),
    }
}
