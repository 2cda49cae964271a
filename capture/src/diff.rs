//! `weft diff A B`: two captures (or two windows of one) compared per
//! syscall and per source — counts, rates and exact latency percentiles,
//! each with B's value against A's — ranked by what changed most, with
//! thresholds a CI job can fail on (`--fail-if 'p99(dur) > 1.2x'`).

use std::{fmt::Write as _, path::Path};

use serde_json::json;
use weft_query::{Answer, Cell};

use crate::{
    answer, capture,
    error::{Error, Result, refuse},
    open::Capture,
};

/// What is compared per syscall, as query columns: the count, then the
/// latency percentiles and the maximum.
const COLUMNS: [&str; 6] = [
    "count",
    "p50(dur)",
    "p90(dur)",
    "p99(dur)",
    "p99.9(dur)",
    "max(dur)",
];

/// One side of a comparison: a capture and the window of it compared.
pub struct Side<'a> {
    pub dir: &'a Path,
    /// A window as queries write it (`last 60s`, `[FROM, TO]`), or the
    /// whole capture.
    pub window: Option<&'a str>,
}

/// One syscall's figures on both sides (`None` where a side has none).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    /// [`COLUMNS`]' values, then the rate per second.
    pub a: Option<Figures>,
    pub b: Option<Figures>,
}

/// A syscall's count, percentiles and maximum (ns), and its rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub values: [i64; 6],
    pub rate: f64,
}

/// A source's records on both sides, and their rates.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceRow {
    pub name: String,
    pub a: (u64, f64),
    pub b: (u64, f64),
}

/// Two sides compared.
#[derive(Debug)]
pub struct Diff {
    /// By how much each changed most, most first.
    pub syscalls: Vec<Row>,
    pub sources: Vec<SourceRow>,
}

/// Compares `a` with `b`.
pub fn diff(a: &Side, b: &Side) -> Result<Diff> {
    let (a_calls, a_sources) = read(a)?;
    let (b_calls, b_sources) = read(b)?;
    let mut names: Vec<&String> = a_calls.iter().chain(&b_calls).map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    let find = |side: &[(String, Figures)], name: &str| {
        side.iter().find(|(n, _)| n == name).map(|(_, f)| f.clone())
    };
    let mut syscalls: Vec<Row> = names
        .into_iter()
        .map(|name| Row {
            name: name.clone(),
            a: find(&a_calls, name),
            b: find(&b_calls, name),
        })
        .collect();
    syscalls.sort_by(|x, y| change(y).total_cmp(&change(x)).then(x.name.cmp(&y.name)));
    let mut source_names: Vec<&String> =
        a_sources.iter().chain(&b_sources).map(|(n, _)| n).collect();
    source_names.sort();
    source_names.dedup();
    let count = |side: &[(String, (u64, f64))], name: &str| {
        side.iter()
            .find(|(n, _)| n == name)
            .map_or((0, 0.0), |(_, c)| *c)
    };
    let sources = source_names
        .into_iter()
        .map(|name| SourceRow {
            name: name.clone(),
            a: count(&a_sources, name),
            b: count(&b_sources, name),
        })
        .collect();
    Ok(Diff { syscalls, sources })
}

/// One side's figures per syscall and records per source.
type Read = (Vec<(String, Figures)>, Vec<(String, (u64, f64))>);

fn read(side: &Side) -> Result<Read> {
    let capture = Capture::open(side.dir)?;
    let snapshot = capture::open(side.dir, false)?;
    let window = side.window.unwrap_or_default();
    let ask = |query: String| {
        answer::ask(&capture, &snapshot, &query, None, false).map(|(answer, _)| answer)
    };
    // Rates over the time the side's calls span (else its records').
    let seconds = ask(format!("syscalls | min(time), max(time) {window}"))
        .ok()
        .as_ref()
        .and_then(span_seconds)
        .or_else(|| {
            let range = snapshot.time_range().ok()??;
            Some((range.end() - range.start()) as f64 / 1e9)
        })
        .unwrap_or(0.0);
    let rate = |count: i64| {
        if seconds > 0.0 {
            count as f64 / seconds
        } else {
            0.0
        }
    };
    let has = |name: &str| snapshot.meta().sources.iter().any(|s| s.name == name);
    let mut calls = Vec::new();
    if has(crate::registry::SYSCALLS) {
        let answer = ask(format!(
            "syscalls | {} by name {window}",
            COLUMNS.join(", ")
        ))?;
        for row in &answer.rows {
            let Some(Cell::Text(name)) = row.first() else {
                continue;
            };
            let values: [i64; 6] = std::array::from_fn(|i| match row.get(i + 1) {
                Some(Cell::Int(v)) => *v,
                _ => 0,
            });
            let figures = Figures {
                rate: rate(values[0]),
                values,
            };
            calls.push((name.clone(), figures));
        }
    }
    let mut sources = Vec::new();
    for source in &snapshot.meta().sources {
        let answer = ask(format!("{} | count {window}", source.name))?;
        let count = match answer.rows.first().and_then(|r| r.first()) {
            Some(Cell::Int(n)) => *n,
            _ => 0,
        };
        sources.push((source.name.clone(), (count.unsigned_abs(), rate(count))));
    }
    Ok((calls, sources))
}

/// The seconds between the first and last call's times, if there are two.
fn span_seconds(answer: &Answer) -> Option<f64> {
    match answer.rows.first()?.as_slice() {
        [Cell::Int(first), Cell::Int(last)] if last > first => Some((last - first) as f64 / 1e9),
        _ => None,
    }
}

/// How much a syscall changed: the larger factor between its two sides'
/// median and p99 (as a log, so halving counts as doubling), the p99 only
/// where both sides have at least [`SAMPLES`] calls (with fewer it is one
/// of the slowest few, which one stall moves), the median weighed down
/// where a side has fewer than [`MEDIAN_SAMPLES`] (one call's median is
/// that call, as noisy as any); a syscall on one side only changed most.
/// Rates are shown, not ranked: two captures of different lengths differ
/// in rate without any call changing.
fn change(row: &Row) -> f64 {
    let (Some(a), Some(b)) = (&row.a, &row.b) else {
        return f64::INFINITY;
    };
    let factor = |i: usize| {
        let (x, y) = (a.values[i] as f64, b.values[i] as f64);
        if x > 0.0 && y > 0.0 {
            (y / x).ln().abs()
        } else {
            0.0
        }
    };
    let fewest = a.values[0].min(b.values[0]);
    let median = factor(1) * (fewest as f64 / MEDIAN_SAMPLES as f64).min(1.0);
    median.max(if fewest >= SAMPLES { factor(3) } else { 0.0 })
}

/// Calls each side needs for its p99 to rank a syscall.
const SAMPLES: i64 = 100;
/// Calls each side needs for its median to rank a syscall in full.
const MEDIAN_SAMPLES: i64 = 10;

/// A threshold a CI job fails on: B's `metric` against A's, `above` or
/// below `factor` (`p99(dur) > 1.2x`, `rate < 0.5x`).
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    pub above: bool,
    pub factor: f64,
    text: String,
}

/// What a threshold compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// One of [`COLUMNS`], by its place.
    Column(usize),
    /// Calls per second.
    Rate,
}

impl Threshold {
    /// `METRIC > FACTORx` or `METRIC < FACTORx`; METRIC is `count`,
    /// `rate`, `p50`, `p90`, `p99`, `p99.9` or `max`, with `(dur)` or not.
    pub fn parse(text: &str) -> Result<Self> {
        let (metric, above, factor) = if let Some((m, f)) = text.split_once('>') {
            (m, true, f)
        } else if let Some((m, f)) = text.split_once('<') {
            (m, false, f)
        } else {
            refuse!(
                "--fail-if {text:?}: write METRIC > FACTORx or METRIC < FACTORx (e.g. 'p99(dur) > 1.2x')"
            );
        };
        let metric = metric.trim();
        let bare = metric.strip_suffix("(dur)").unwrap_or(metric);
        let metric = match bare {
            "rate" => Metric::Rate,
            other => {
                let column = COLUMNS
                    .iter()
                    .position(|c| c.strip_suffix("(dur)").unwrap_or(c) == other)
                    .ok_or_else(|| {
                        Error::Refused(format!(
                            "--fail-if {text:?}: `{metric}` is not count, rate, p50, p90, p99, p99.9 or max"
                        ))
                    })?;
                Metric::Column(column)
            }
        };
        let factor = factor.trim();
        let factor = factor
            .strip_suffix('x')
            .unwrap_or(factor)
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0)
            .ok_or_else(|| {
                Error::Refused(format!(
                    "--fail-if {text:?}: `{factor}` is not a factor such as 1.2x"
                ))
            })?;
        Ok(Self {
            metric,
            above,
            factor,
            text: text.trim().to_owned(),
        })
    }

    /// Where `row` crosses it: B's value against A's, said as a line.
    pub fn crossed(&self, row: &Row) -> Option<String> {
        let (a, b) = (row.a.as_ref()?, row.b.as_ref()?);
        let value = |f: &Figures| match self.metric {
            Metric::Rate => f.rate,
            Metric::Column(i) => f.values[i] as f64,
        };
        let (a, b) = (value(a), value(b));
        if a <= 0.0 {
            return None;
        }
        let ratio = b / a;
        let crossed = if self.above {
            ratio > self.factor
        } else {
            ratio < self.factor
        };
        crossed.then(|| {
            format!(
                "{}: {} is {ratio:.2}x A's ({a:.0} -> {b:.0}), past --fail-if '{}'",
                row.name,
                self.label(),
                self.text
            )
        })
    }

    fn label(&self) -> &'static str {
        match self.metric {
            Metric::Rate => "rate",
            Metric::Column(i) => COLUMNS[i],
        }
    }
}

impl Diff {
    /// The comparison as a table: sources, then syscalls, most changed
    /// first, each value A -> B with B's factor.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<12} {:>24} {:>24}",
            "SOURCE", "RECORDS A -> B", "RATE/s A -> B"
        );
        for s in &self.sources {
            let _ = writeln!(
                out,
                "{:<12} {:>24} {:>24}",
                s.name,
                format!("{} -> {}", s.a.0, s.b.0),
                format!("{:.0} -> {:.0}", s.a.1, s.b.1)
            );
        }
        let _ = writeln!(
            out,
            "\n{:<16} {:>26} {:>26} {:>26} {:>26}",
            "SYSCALL", "COUNT A -> B", "P50 A -> B", "P99 A -> B", "MAX A -> B"
        );
        for row in &self.syscalls {
            let cell = |i: usize, time: bool| match (&row.a, &row.b) {
                (Some(a), Some(b)) => {
                    let (x, y) = (a.values[i], b.values[i]);
                    let shown = |v: i64| if time { duration(v) } else { v.to_string() };
                    let factor = if x > 0 {
                        format!(" ({:.2}x)", y as f64 / x as f64)
                    } else {
                        String::new()
                    };
                    format!("{} -> {}{factor}", shown(x), shown(y))
                }
                (Some(_), None) => "only in A".into(),
                _ => "only in B".into(),
            };
            let _ = writeln!(
                out,
                "{:<16} {:>26} {:>26} {:>26} {:>26}",
                row.name,
                cell(0, false),
                cell(1, true),
                cell(3, true),
                cell(5, true)
            );
        }
        out
    }

    /// One JSON object per syscall: A's and B's figures (null where a
    /// side has none), durations in ns.
    pub fn json_lines(&self) -> String {
        let side = |f: &Option<Figures>| {
            f.as_ref().map(|f| {
                let mut object: serde_json::Map<String, serde_json::Value> = COLUMNS
                    .iter()
                    .zip(f.values)
                    .map(|(c, v)| ((*c).to_owned(), v.into()))
                    .collect();
                object.insert("rate".into(), json!(f.rate));
                object
            })
        };
        self.syscalls
            .iter()
            .map(|row| {
                json!({ "name": row.name, "a": side(&row.a), "b": side(&row.b) }).to_string() + "\n"
            })
            .collect()
    }
}

/// A duration in ns as weft's tables show one.
fn duration(ns: i64) -> String {
    weft_query::answer::duration(ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, a: [i64; 6], b: [i64; 6]) -> Row {
        let figures = |values: [i64; 6]| Figures {
            values,
            rate: values[0] as f64,
        };
        Row {
            name: name.into(),
            a: Some(figures(a)),
            b: Some(figures(b)),
        }
    }

    #[test]
    fn a_threshold_crosses_on_b_against_a() {
        let slow = row(
            "fsync",
            [10, 100, 200, 300, 400, 500],
            [10, 100, 200, 390, 400, 500],
        );
        let p99 = Threshold::parse("p99(dur) > 1.2x").unwrap();
        assert_eq!(p99.metric, Metric::Column(3));
        assert!(
            p99.crossed(&slow)
                .unwrap()
                .contains("fsync: p99(dur) is 1.30x")
        );
        assert_eq!(Threshold::parse("p99 > 1.5x").unwrap().crossed(&slow), None);
        assert!(
            Threshold::parse("count < 1.1x")
                .unwrap()
                .crossed(&slow)
                .is_some()
        );
        for bad in ["p98 > 2x", "p99 = 2x", "p99 > fast", "p99 > -1x"] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_changed_most_comes_first() {
        let same = row(
            "read",
            [10, 100, 200, 300, 400, 500],
            [10, 100, 200, 300, 400, 500],
        );
        let slower = row(
            "fsync",
            [100, 100, 200, 300, 400, 500],
            [100, 300, 200, 300, 400, 500],
        );
        let faster = row(
            "write",
            [100, 100, 200, 300, 400, 500],
            [100, 100, 200, 60, 400, 500],
        );
        let mut rows = [same, slower, faster];
        rows.sort_by(|x, y| change(y).total_cmp(&change(x)));
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["write", "fsync", "read"],
            "a fifth outranks a triple"
        );
        // With 10 calls a side, a p99 (their slowest) does not rank.
        let few = row(
            "close",
            [10, 100, 200, 300, 400, 500],
            [10, 100, 200, 3000, 400, 500],
        );
        assert!(change(&few) < 1e-9);
        // One call 3.7x slower ranks below thirty 3x slower (a capture's
        // single munmap, against the sleeps a delay was put into).
        let once = row(
            "munmap",
            [1, 9144, 9144, 9144, 9144, 9144],
            [1, 34371, 34371, 34371, 34371, 34371],
        );
        let sleeps = row(
            "nanosleep",
            [30, 2_081_846, 2_336_188, 2_850_701, 2_850_701, 2_850_701],
            [30, 6_079_889, 6_113_029, 11_603_804, 11_603_804, 11_603_804],
        );
        assert!(change(&sleeps) > change(&once));
    }
}
