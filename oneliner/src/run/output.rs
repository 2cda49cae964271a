//! Map values and how they print: bpftrace's text layout (so output can be
//! compared line for line) or its NDJSON records.

use std::io::Write;

use hdrhistogram::Histogram;
use weft_abi::oneliner::{self, AggValue};

use crate::{
    check::{MapInfo, MapKind},
    json::{self, Json},
    value::Value,
};

/// How results print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// bpftrace's text layout.
    Text,
    /// One JSON object per line, as `bpftrace -f json`.
    Json,
    /// Maps as folded stacks for flame graph tools (what bpftrace's output
    /// becomes through `stackcollapse-bpftrace.pl`): one line per element,
    /// its key's parts as frames (a stack's frames outermost first) joined
    /// by `;`, then its value. Text a probe prints stays text.
    Folded,
}

/// One map element's aggregate.
#[derive(Debug, Clone)]
pub enum Agg {
    Count(u64),
    Sum(i64),
    Avg {
        sum: i64,
        count: u64,
    },
    Min(i64),
    Max(i64),
    Stats {
        sum: i64,
        count: u64,
    },
    /// log2 buckets: 0 negative, 1 zero, 2 one, k ≥ 3 holds [2^(k-2), 2^(k-1)).
    Hist(Vec<u64>),
    /// Linear buckets: 0 below min, then one per step, then the rest.
    Lhist(Vec<u64>),
    /// Values at HDR precision (3 significant digits); negatives count as 0.
    Percentiles(Box<Percentiles>),
    Value(Value),
}

impl Agg {
    /// An empty aggregate of `kind`.
    pub fn new(kind: MapKind) -> Self {
        match kind {
            MapKind::Count => Self::Count(0),
            MapKind::Sum => Self::Sum(0),
            MapKind::Avg => Self::Avg { sum: 0, count: 0 },
            MapKind::Min => Self::Min(i64::MAX),
            MapKind::Max => Self::Max(i64::MIN),
            MapKind::Stats => Self::Stats { sum: 0, count: 0 },
            MapKind::Hist => Self::Hist(vec![0; 65]),
            MapKind::Lhist { min, max, step } => {
                Self::Lhist(vec![0; ((max - min) / step) as usize + 2])
            }
            MapKind::Percentiles => Self::Percentiles(Box::default()),
            MapKind::Value(_) => Self::Value(Value::Int(0)),
        }
    }

    /// Adds one sample.
    pub fn add(&mut self, kind: MapKind, v: i64) {
        match self {
            Self::Count(n) => *n += 1,
            Self::Sum(s) => *s = s.wrapping_add(v),
            Self::Avg { sum, count } | Self::Stats { sum, count } => {
                *sum = sum.wrapping_add(v);
                *count += 1;
            }
            Self::Min(m) => *m = (*m).min(v),
            Self::Max(m) => *m = (*m).max(v),
            Self::Hist(buckets) => buckets[log2_bucket(v)] += 1,
            Self::Lhist(buckets) => {
                if let MapKind::Lhist { min, max, step } = kind {
                    buckets[linear_bucket(v, min, max, step)] += 1;
                }
            }
            Self::Percentiles(p) => p.record(v),
            Self::Value(_) => {}
        }
    }

    /// Adds what the kernel aggregated under bucket `slot` (`hist()` and
    /// `lhist()`; 0 for the rest).
    pub fn merge(&mut self, slot: usize, kernel: &AggValue) {
        match self {
            Self::Count(n) => *n += kernel.count,
            Self::Sum(s) => *s = s.wrapping_add(kernel.sum),
            Self::Avg { sum, count } | Self::Stats { sum, count } => {
                *sum = sum.wrapping_add(kernel.sum);
                *count += kernel.count;
            }
            Self::Min(m) => *m = (*m).min(kernel.min),
            Self::Max(m) => *m = (*m).max(kernel.max),
            Self::Hist(buckets) | Self::Lhist(buckets) => {
                if let Some(bucket) = buckets.get_mut(slot) {
                    *bucket += kernel.count;
                }
            }
            Self::Percentiles(_) | Self::Value(_) => {}
        }
    }

    /// The value a lookup in an expression gives.
    pub fn read(&self) -> Value {
        match self {
            Self::Count(n) => Value::Int(*n as i64),
            Self::Sum(n) | Self::Min(n) | Self::Max(n) => Value::Int(*n),
            Self::Value(v) => v.clone(),
            _ => Value::Int(0),
        }
    }

    /// The number the elements of a map are sorted by, as bpftrace does.
    fn sort_value(&self) -> i64 {
        match self {
            Self::Hist(b) | Self::Lhist(b) => b.iter().sum::<u64>() as i64,
            Self::Avg { sum, count } | Self::Stats { sum, count } => average(*sum, *count),
            Self::Percentiles(p) => p.at(0.99),
            other => other.read().to_string().parse().unwrap_or(0),
        }
    }
}

/// The values of a `percentiles()` element.
#[derive(Debug, Clone)]
pub struct Percentiles {
    histogram: Histogram<u64>,
    /// The exact largest value, so that `max` is not rounded.
    max: i64,
}

impl Default for Percentiles {
    fn default() -> Self {
        Self {
            histogram: Histogram::new(3).expect("3 significant digits is valid"),
            max: 0,
        }
    }
}

impl Percentiles {
    fn record(&mut self, v: i64) {
        let v = v.max(0);
        // Auto-resizing: record fails only for values beyond u64.
        let _ = self.histogram.record(v as u64);
        self.max = self.max.max(v);
    }

    /// The value at quantile `q`: the lowest value of its HDR bucket, so a
    /// value recorded exactly is reported exactly.
    fn at(&self, q: f64) -> i64 {
        let value = self.histogram.value_at_quantile(q);
        (self.histogram.lowest_equivalent(value) as i64).min(self.max)
    }
}

fn average(sum: i64, count: u64) -> i64 {
    if count == 0 { 0 } else { sum / count as i64 }
}

/// bpftrace's log2 bucket of `v`, as the kernel files it.
pub fn log2_bucket(v: i64) -> usize {
    oneliner::log2_bucket(v) as usize
}

/// bpftrace's linear bucket of `v`, as the kernel files it.
pub fn linear_bucket(v: i64, min: i64, max: i64, step: i64) -> usize {
    oneliner::linear_bucket(v, min, max, step) as usize
}

/// Text a probe printed (`printf`, `time`).
pub fn text(
    format: OutputFormat,
    kind: &str,
    text: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        OutputFormat::Text | OutputFormat::Folded => out.write_all(text.as_bytes()),
        OutputFormat::Json => writeln!(out, "{}", json::line(kind, &Json::string(text))),
    }
}

/// `print(value)`.
pub fn value(format: OutputFormat, value: &Value, out: &mut dyn Write) -> std::io::Result<()> {
    match format {
        OutputFormat::Text | OutputFormat::Folded => writeln!(out, "{value}"),
        OutputFormat::Json => writeln!(out, "{}", json::line("value", &Json::value(value))),
    }
}

/// `print(value)` of an unsigned value.
pub fn unsigned(format: OutputFormat, value: u64, out: &mut dyn Write) -> std::io::Result<()> {
    match format {
        OutputFormat::Text | OutputFormat::Folded => writeln!(out, "{value}"),
        OutputFormat::Json => writeln!(out, "{}", json::line("value", &Json::int(value))),
    }
}

/// Prints a map: elements sorted ascending, the `top` largest only when
/// non-zero, values divided by `div`.
pub fn print_map<'a>(
    format: OutputFormat,
    info: &MapInfo,
    elements: impl IntoIterator<Item = (&'a Vec<Value>, &'a Agg)>,
    top: usize,
    div: i64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    // bpftrace 0.17's max() writes an element only where the sample is at
    // least what it holds, 0 for a new one: `max(0)` prints 0, and an
    // element whose samples were all below 0 is never written.
    let mut sorted: Vec<(&Vec<Value>, &Agg)> = (elements.into_iter())
        .filter(|(_, agg)| !matches!(agg, Agg::Max(n) if *n < 0))
        .collect();
    // An unsigned map's values order as unsigned numbers.
    let order = |agg: &Agg| {
        let value = agg.sort_value();
        if info.unsigned {
            i128::from(value.cast_unsigned())
        } else {
            i128::from(value)
        }
    };
    sorted.sort_by(|a, b| order(a.1).cmp(&order(b.1)).then_with(|| a.0.cmp(b.0)));
    if top > 0 && sorted.len() > top {
        sorted.drain(..sorted.len() - top);
    }
    // bpftrace 0.17 keeps a count with no key in a map that always holds
    // it, so such a map prints 0 before any event and after `clear()`.
    let (no_key, zero) = (Vec::new(), Agg::Count(0));
    if sorted.is_empty() && info.kind == MapKind::Count && info.keys.is_empty() {
        sorted.push((&no_key, &zero));
    }
    match format {
        OutputFormat::Text => print_text(info, &sorted, div, out),
        OutputFormat::Json => print_json(info, &sorted, div, out),
        OutputFormat::Folded => print_folded(&sorted, div, out),
    }
}

/// Elements with a single value (counts, sums, ...) as folded stacks;
/// histograms and the like have no single value and are left out.
fn print_folded(
    sorted: &[(&Vec<Value>, &Agg)],
    div: i64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for (key, agg) in sorted {
        if matches!(
            agg,
            Agg::Hist(_) | Agg::Lhist(_) | Agg::Stats { .. } | Agg::Percentiles(_)
        ) || matches!(agg, Agg::Value(value) if !value.is_int())
        {
            continue;
        }
        let frames: Vec<String> = key.iter().flat_map(frames).collect();
        let frames = if frames.is_empty() {
            vec!["all".to_owned()]
        } else {
            frames
        };
        writeln!(out, "{} {}", frames.join(";"), agg.sort_value() / div)?;
    }
    Ok(())
}

/// A key part as frames: a stack (`kstack`, `ustack`: a newline, then a
/// frame a line, innermost first) outermost first; anything else one frame.
/// `;` inside a frame becomes `:`, and perf's layout (a tab, the address,
/// then the name) leaves the address out.
fn frames(part: &Value) -> Vec<String> {
    let text = part.to_string();
    let clean = |frame: &str| {
        let name = match frame.strip_prefix('\t') {
            Some(perf) => perf.split_once(' ').map_or(perf, |(_, name)| name),
            None => frame,
        };
        name.trim().replace(';', ":")
    };
    if text.starts_with('\n') {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .rev()
            .map(clean)
            .collect()
    } else {
        vec![clean(&text)]
    }
}

fn key_text(info: &MapInfo, key: &[Value]) -> String {
    if key.is_empty() {
        return format!("@{}", info.name);
    }
    format!("@{}[{}]", info.name, key_parts(info, key).join(", "))
}

/// The parts of a key of `info`'s map as bpftrace prints them: a pointer
/// in hex.
fn key_parts(info: &MapInfo, key: &[Value]) -> Vec<String> {
    let pointer = |i: usize| info.pointer_keys.get(i).copied().unwrap_or(false);
    (key.iter().enumerate())
        .map(|(i, part)| match part {
            Value::Int(n) if pointer(i) => format!("{:#x}", n.cast_unsigned()),
            _ => key_part(part),
        })
        .collect()
}

/// A key part as bpftrace prints it, in text and JSON: a stack's frames
/// are indented by 4 spaces there, where a value or `printf` indents them
/// by 8.
fn key_part(part: &Value) -> String {
    let text = part.key_text();
    if !text.starts_with('\n') {
        return text;
    }
    text.lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .chain([""])
        .collect::<Vec<_>>()
        .join("\n")
}

fn print_text(
    info: &MapInfo,
    sorted: &[(&Vec<Value>, &Agg)],
    div: i64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if sorted.is_empty() {
        // bpftrace prints an empty line for an empty map.
        writeln!(out)?;
    }
    for (key, agg) in sorted {
        let name = key_text(info, key);
        match agg {
            Agg::Hist(buckets) => {
                writeln!(out, "{name}: ")?;
                write_bars(&log2_rows(buckets), div, out)?;
                writeln!(out)?;
            }
            Agg::Lhist(buckets) => {
                let MapKind::Lhist { min, max, step } = info.kind else {
                    unreachable!()
                };
                writeln!(out, "{name}: ")?;
                // bpftrace 0.17 divides a hist's counts, not an lhist's,
                // and leaves a stats() map undivided.
                write_bars(&linear_rows(buckets, min, max, step), 1, out)?;
                writeln!(out)?;
            }
            Agg::Stats { sum, count } => writeln!(
                out,
                "{name}: count {count}, average {}, total {sum}",
                average(*sum, *count),
            )?,
            Agg::Avg { sum, count } => writeln!(out, "{name}: {}", average(*sum, *count) / div)?,
            Agg::Percentiles(p) => {
                let q = |q: f64| p.at(q) / div;
                writeln!(
                    out,
                    "{name}: count {}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
                    p.histogram.len(),
                    q(0.5),
                    q(0.9),
                    q(0.99),
                    q(0.999),
                    p.max / div
                )?;
            }
            Agg::Value(value) if !value.is_int() => {
                writeln!(out, "{name}: {value}")?;
            }
            other => writeln!(out, "{name}: {}", number(info, other, div))?,
        }
    }
    // Averages, stats and percentiles end with an empty line in bpftrace,
    // empty ones too.
    if matches!(
        info.kind,
        MapKind::Avg | MapKind::Stats | MapKind::Percentiles
    ) {
        writeln!(out)?;
    }
    Ok(())
}

/// An element's one number divided by `div`, unsigned where its map is.
fn number(info: &MapInfo, agg: &Agg, div: i64) -> String {
    let value = agg.sort_value();
    if info.unsigned {
        (value.cast_unsigned() / div.cast_unsigned().max(1)).to_string()
    } else {
        (value / div).to_string()
    }
}

/// One printed bucket: its label, its JSON bounds and its count.
struct Row {
    label: String,
    min: Option<i64>,
    max: Option<i64>,
    count: u64,
}

/// The rows from the first to the last non-empty bucket.
fn trimmed(rows: Vec<Row>) -> Vec<Row> {
    let first = rows.iter().position(|r| r.count > 0);
    let last = rows.iter().rposition(|r| r.count > 0);
    match (first, last) {
        (Some(first), Some(last)) => rows
            .into_iter()
            .skip(first)
            .take(last - first + 1)
            .collect(),
        _ => Vec::new(),
    }
}

/// A power of two with bpftrace's K/M/G/T suffixes.
fn power_label(power: u32) -> String {
    let (power, suffix) = match power {
        40.. => (power - 40, "T"),
        30.. => (power - 30, "G"),
        20.. => (power - 20, "M"),
        10.. => (power - 10, "K"),
        _ => (power, ""),
    };
    format!("{}{suffix}", 1u64 << power)
}

fn log2_rows(buckets: &[u64]) -> Vec<Row> {
    let rows = buckets
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let (label, min, max) = match i {
                0 => ("(..., 0)".to_string(), None, Some(-1)),
                1 => ("[0]".into(), Some(0), Some(0)),
                2 => ("[1]".into(), Some(1), Some(1)),
                _ => {
                    let low = i as u32 - 2;
                    (
                        format!("[{}, {})", power_label(low), power_label(low + 1)),
                        Some(1i64 << low),
                        Some(((1i128 << (low + 1)) - 1).min(i64::MAX.into()) as i64),
                    )
                }
            };
            Row {
                label,
                min,
                max,
                count,
            }
        })
        .collect();
    trimmed(rows)
}

/// A number with bpftrace's lhist K/M suffixes for exact multiples.
fn linear_label(n: i64) -> String {
    const KILO: i64 = 1024;
    const MEGA: i64 = 1024 * 1024;
    if n != 0 && n % MEGA == 0 {
        format!("{}M", n / MEGA)
    } else if n != 0 && n % KILO == 0 {
        format!("{}K", n / KILO)
    } else {
        n.to_string()
    }
}

fn linear_rows(buckets: &[u64], min: i64, max: i64, step: i64) -> Vec<Row> {
    let last = buckets.len() - 1;
    let rows = buckets
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let (label, low, high) = if i == 0 {
                (format!("(..., {})", linear_label(min)), None, Some(min - 1))
            } else if i == last {
                (format!("[{}, ...)", linear_label(max)), Some(max), None)
            } else {
                let low = min + (i as i64 - 1) * step;
                (
                    format!("[{}, {})", linear_label(low), linear_label(low + step)),
                    Some(low),
                    Some(low + step - 1),
                )
            };
            Row {
                label,
                min: low,
                max: high,
                count,
            }
        })
        .collect();
    trimmed(rows)
}

/// bpftrace's histogram lines: label left in 16, count right in 8, a 52-wide bar.
/// A histogram's rows with their bars; each count shown divided by `div`,
/// the bars drawn from the counts themselves, as bpftrace 0.17 draws them.
fn write_bars(rows: &[Row], div: i64, out: &mut dyn Write) -> std::io::Result<()> {
    let max = rows.iter().map(|r| r.count).max().unwrap_or(0).max(1);
    for row in rows {
        let bar = (row.count * 52 / max) as usize;
        writeln!(
            out,
            "{:<16}{:>8} |{}{}|",
            row.label,
            row.count / div.cast_unsigned().max(1),
            "@".repeat(bar),
            " ".repeat(52 - bar)
        )?;
    }
    Ok(())
}

/// A histogram's rows, each count divided by `div`.
fn json_rows(rows: &[Row], div: i64) -> Json {
    Json::Array(
        rows.iter()
            .map(|r| {
                let bounds = [("min", r.min), ("max", r.max)];
                let bounds = bounds
                    .into_iter()
                    .filter_map(|(name, bound)| Some((name, Json::int(bound?))));
                let count = r.count / div.cast_unsigned().max(1);
                Json::object(bounds.chain([("count", Json::int(count))]))
            })
            .collect(),
    )
}

fn print_json(
    info: &MapInfo,
    sorted: &[(&Vec<Value>, &Agg)],
    div: i64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if sorted.is_empty() {
        return Ok(());
    }
    let kind = match info.kind {
        MapKind::Hist | MapKind::Lhist { .. } => "hist",
        MapKind::Avg | MapKind::Stats | MapKind::Percentiles => "stats",
        _ => "map",
    };
    let element = |agg: &Agg| -> Json {
        match agg {
            Agg::Hist(b) => json_rows(&log2_rows(b), div),
            Agg::Lhist(b) => {
                let MapKind::Lhist { min, max, step } = info.kind else {
                    unreachable!()
                };
                json_rows(&linear_rows(b, min, max, step), 1)
            }
            Agg::Stats { sum, count } => Json::object([
                ("count", Json::int(*count)),
                ("average", Json::int(average(*sum, *count))),
                ("total", Json::int(*sum)),
            ]),
            Agg::Avg { sum, count } => Json::int(average(*sum, *count) / div),
            Agg::Percentiles(p) => {
                let q = |q: f64| Json::int(p.at(q) / div);
                Json::object([
                    ("count", Json::int(p.histogram.len())),
                    ("p50", q(0.5)),
                    ("p90", q(0.9)),
                    ("p99", q(0.99)),
                    ("p99.9", q(0.999)),
                    ("max", Json::int(p.max / div)),
                ])
            }
            Agg::Value(value) if !value.is_int() => Json::value(value),
            other => Json::Raw(number(info, other, div)),
        }
    };
    let data = if sorted.len() == 1 && sorted[0].0.is_empty() {
        element(sorted[0].1)
    } else {
        Json::object(sorted.iter().map(|(key, agg)| {
            // A stack's frames indented as in the text's keys.
            (key_parts(info, key).join(","), element(agg))
        }))
    };
    writeln!(
        out,
        "{}",
        json::line(kind, &Json::object([(format!("@{}", info.name), data)]))
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn buckets_match_bpftrace() {
        assert_eq!(log2_bucket(-5), 0);
        assert_eq!(log2_bucket(0), 1);
        assert_eq!(log2_bucket(1), 2);
        assert_eq!(log2_bucket(2), 3);
        assert_eq!(log2_bucket(3), 3);
        assert_eq!(log2_bucket(1000), 11);
        assert_eq!(linear_bucket(-1, 0, 2000, 500), 0);
        assert_eq!(linear_bucket(999, 0, 2000, 500), 2);
        assert_eq!(linear_bucket(2996, 0, 2000, 500), 5);
    }

    #[test]
    fn folded_maps_put_a_stacks_outermost_frame_first() {
        let info = MapInfo {
            name: String::new(),
            kind: MapKind::Count,
            keys: vec![],
            unsigned: false,
            pointer_keys: Vec::new(),
        };
        let stack = Value::Str("\n        schedule+10\n        do_nanosleep+7\n".into());
        let mut one = Agg::new(MapKind::Count);
        one.add(MapKind::Count, 1);
        let mut three = Agg::new(MapKind::Count);
        for _ in 0..3 {
            three.add(MapKind::Count, 1);
        }
        // perf's layout names the same frames.
        let perf = Value::Str(
            "\n\tffffffff81e0 main+4 (/bin/sleeper)\n\t7f10 0x7f10 ([unknown])\n".into(),
        );
        let map = HashMap::from([
            (vec![Value::Str("sleep;er".into()), stack], three),
            (vec![Value::Int(7)], one.clone()),
            (vec![perf], one),
        ]);
        let mut out = Vec::new();
        print_map(OutputFormat::Folded, &info, &map, 0, 1, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "7 1\n0x7f10 ([unknown]);main+4 (/bin/sleeper) 1\nsleep:er;do_nanosleep+7;schedule+10 3\n"
        );
    }

    #[test]
    fn hist_layout_is_bpftrace_s() {
        // The values of `dd bs=1000 count=20` and `dd bs=3 count=2` under
        // `@b = hist(args->ret)` of sys_exit_read, and bpftrace 0.17's output.
        let info = MapInfo {
            name: "b".into(),
            kind: MapKind::Hist,
            keys: vec![],
            unsigned: false,
            pointer_keys: Vec::new(),
        };
        let mut agg = Agg::new(MapKind::Hist);
        for v in [0, 0, 3, 3, 2996, 2996]
            .into_iter()
            .chain(std::iter::repeat_n(1000, 22))
        {
            agg.add(MapKind::Hist, v);
        }
        let map = HashMap::from([(vec![], agg)]);
        let mut out = Vec::new();
        print_map(OutputFormat::Text, &info, &map, 0, 1, &mut out).unwrap();
        let expected = "@b: \n\
[0]                    2 |@@@@                                                |\n\
[1]                    0 |                                                    |\n\
[2, 4)                 2 |@@@@                                                |\n\
[4, 8)                 0 |                                                    |\n\
[8, 16)                0 |                                                    |\n\
[16, 32)               0 |                                                    |\n\
[32, 64)               0 |                                                    |\n\
[64, 128)              0 |                                                    |\n\
[128, 256)             0 |                                                    |\n\
[256, 512)             0 |                                                    |\n\
[512, 1K)             22 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
[1K, 2K)               0 |                                                    |\n\
[2K, 4K)               2 |@@@@                                                |\n\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn lhist_and_count_layout() {
        let kind = MapKind::Lhist {
            min: 0,
            max: 2000,
            step: 500,
        };
        let info = MapInfo {
            name: "l".into(),
            kind,
            keys: vec![],
            unsigned: false,
            pointer_keys: Vec::new(),
        };
        let mut agg = Agg::new(kind);
        for v in [0, 0, 3, 3, 600, 600, 2996, 2996]
            .into_iter()
            .chain(std::iter::repeat_n(1000, 20))
        {
            agg.add(kind, v);
        }
        let map = HashMap::from([(vec![], agg)]);
        let mut out = Vec::new();
        print_map(OutputFormat::Text, &info, &map, 0, 1, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "@l: \n\
[0, 500)               4 |@@@@@@@@@@                                          |\n\
[500, 1000)            2 |@@@@@                                               |\n\
[1000, 1500)          20 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
[1500, 2000)           0 |                                                    |\n\
[2000, ...)            2 |@@@@@                                               |\n\n"
        );
        let info = MapInfo {
            name: "c".into(),
            kind: MapKind::Count,
            keys: vec![],
            unsigned: false,
            pointer_keys: Vec::new(),
        };
        let key = |pid| vec![Value::Str("dd".into()), Value::Int(pid)];
        let map = HashMap::from([(key(22743), Agg::Count(23)), (key(22744), Agg::Count(5))]);
        let mut out = Vec::new();
        print_map(OutputFormat::Text, &info, &map, 0, 1, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "@c[dd, 22744]: 5\n@c[dd, 22743]: 23\n"
        );
    }
    #[test]
    fn print_divides_a_hist_s_counts_but_not_its_bars_nor_stats() {
        // bpftrace 0.17's `print(@h, 0, 2)`, `print(@s, 0, 2)` and
        // `print(@l, 0, 2)` after three 5s and a 100 (two 5s in @l).
        let info = |name: &str, kind| MapInfo {
            name: name.into(),
            kind,
            keys: vec![],
            unsigned: false,
            pointer_keys: Vec::new(),
        };
        let lhist = MapKind::Lhist {
            min: 0,
            max: 10,
            step: 5,
        };
        let printed = |format, name, kind, values: &[i64]| {
            let mut agg = Agg::new(kind);
            for value in values {
                agg.add(kind, *value);
            }
            let map = HashMap::from([(vec![], agg)]);
            let mut out = Vec::new();
            print_map(format, &info(name, kind), &map, 0, 2, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            printed(OutputFormat::Text, "h", MapKind::Hist, &[5, 5, 5, 100]),
            "@h: \n\
[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
[8, 16)                0 |                                                    |\n\
[16, 32)               0 |                                                    |\n\
[32, 64)               0 |                                                    |\n\
[64, 128)              0 |@@@@@@@@@@@@@@@@@                                   |\n\n"
        );
        assert_eq!(
            printed(OutputFormat::Json, "h", MapKind::Hist, &[5, 5, 5, 100]),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 4, \"max\": 7, \"count\": 1}, \
{\"min\": 8, \"max\": 15, \"count\": 0}, {\"min\": 16, \"max\": 31, \"count\": 0}, \
{\"min\": 32, \"max\": 63, \"count\": 0}, {\"min\": 64, \"max\": 127, \"count\": 0}]}}\n"
        );
        assert_eq!(
            printed(OutputFormat::Text, "s", MapKind::Stats, &[5]),
            "@s: count 1, average 5, total 5\n\n"
        );
        assert_eq!(
            printed(OutputFormat::Json, "s", MapKind::Stats, &[5]),
            "{\"type\": \"stats\", \"data\": {\"@s\": {\"count\": 1, \"average\": 5, \"total\": 5}}}\n"
        );
        assert_eq!(
            printed(OutputFormat::Json, "l", lhist, &[5, 5]),
            "{\"type\": \"hist\", \"data\": {\"@l\": [{\"min\": 5, \"max\": 9, \"count\": 2}]}}\n"
        );
    }
}
