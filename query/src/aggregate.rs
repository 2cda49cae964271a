//! In-memory aggregation of scanned records: per group, the count, sum,
//! extremes, exact quantiles (values are kept and selected, nearest rank,
//! the same definition as the store's) and power-of-two histograms.

use std::collections::HashMap;

use crate::{
    answer::{Cell, Header},
    ast::Func,
    catalog::Kind,
};

/// The quantiles `percentiles(x)` shows, then the maximum.
pub const PERCENTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 0.9999];

/// One aggregate to compute: the function and the column it reads.
#[derive(Clone, Debug)]
pub struct AggSpec {
    /// The function.
    pub func: Func,
    /// Column number in the source (`None` for `count`).
    pub column: Option<usize>,
    /// The column's name, for headers.
    pub field: String,
    /// The column's kind, for headers.
    pub kind: Kind,
}

impl AggSpec {
    /// Output column headers (one, except for `percentiles` and `hist`).
    pub fn headers(&self) -> Vec<Header> {
        let header = |name: String, kind: Kind| Header { name, kind };
        let of = |f: &str| format!("{f}({})", self.field);
        let kind = match self.kind {
            Kind::Named(_) => Kind::Int,
            ref k => k.clone(),
        };
        match self.func {
            Func::Count => vec![header("count".into(), Kind::Int)],
            Func::Sum => vec![header(of("sum"), kind)],
            Func::Min => vec![header(of("min"), kind)],
            Func::Max => vec![header(of("max"), kind)],
            Func::Avg => vec![header(of("avg"), kind)],
            Func::Quantile(q) => vec![header(of(&quantile_name(q)), kind)],
            Func::Percentiles => PERCENTILES
                .iter()
                .map(|q| header(of(&quantile_name(*q)), kind.clone()))
                .chain([header(of("max"), kind.clone())])
                .collect(),
            Func::Hist => vec![
                header("from".into(), kind.clone()),
                header("to".into(), kind),
                header("count".into(), Kind::Int),
                header(of("hist"), Kind::Int),
            ],
        }
    }

    /// Whether it is a quantile (its values are kept, or counted per bin).
    pub(crate) fn keeps_values(&self) -> bool {
        matches!(self.func, Func::Quantile(_) | Func::Percentiles)
    }
}

/// `0.9999` → `p99.99`.
pub fn quantile_name(q: f64) -> String {
    let text = format!("{:.4}", q * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

/// Running totals of one aggregate in one group.
#[derive(Clone, Debug, Default)]
pub struct Acc {
    count: u64,
    sum: i128,
    min: Option<i64>,
    max: Option<i64>,
    /// Every value, for exact quantiles.
    values: Vec<i64>,
    /// Power-of-two buckets, see [`bucket`].
    hist: Vec<u64>,
}

impl Acc {
    /// Adds one value.
    pub fn add(&mut self, spec: &AggSpec, value: i64) {
        self.count += 1;
        self.sum += i128::from(value);
        self.min = Some(self.min.map_or(value, |m| m.min(value)));
        self.max = Some(self.max.map_or(value, |m| m.max(value)));
        if spec.keeps_values() {
            self.values.push(value);
        }
        if spec.func == Func::Hist {
            let b = bucket(value);
            if self.hist.len() <= b {
                self.hist.resize(b + 1, 0);
            }
            self.hist[b] += 1;
        }
    }

    /// Counts `n` more records (a `count` with nothing else).
    pub fn add_count(&mut self, n: u64) {
        self.count += n;
    }

    /// A `count` accumulator that counted `n` records.
    pub fn counted(n: u64) -> Self {
        Self {
            count: n,
            ..Self::default()
        }
    }

    /// A `hist` accumulator whose buckets (see [`bucket`]) hold `counts`.
    pub fn with_hist(counts: Vec<u64>) -> Self {
        Self {
            count: counts.iter().sum(),
            hist: counts,
            ..Self::default()
        }
    }

    /// Output cells, as many as the spec's headers (for all but `hist`).
    pub fn cells(&mut self, spec: &AggSpec) -> Vec<Cell> {
        let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
        match spec.func {
            Func::Count => vec![Cell::Int(self.count.cast_signed())],
            Func::Sum => vec![Cell::Int(
                i64::try_from(self.sum).unwrap_or(if self.sum < 0 { i64::MIN } else { i64::MAX }),
            )],
            Func::Min => vec![int(self.min)],
            Func::Max => vec![int(self.max)],
            Func::Avg => vec![if self.count == 0 {
                Cell::Null
            } else {
                Cell::Float(self.sum as f64 / self.count as f64)
            }],
            Func::Quantile(q) => vec![int(select(&mut self.values, q))],
            Func::Percentiles => PERCENTILES
                .iter()
                .map(|q| int(select(&mut self.values, *q)))
                .chain([int(self.max)])
                .collect(),
            Func::Hist => Vec::new(),
        }
    }

    /// Histogram rows: from, to, count, bar; empty buckets between the
    /// first and last used ones included, as bpftrace prints them.
    pub fn hist_rows(&self) -> Vec<Vec<Cell>> {
        let first = self.hist.iter().position(|c| *c > 0);
        let last = self.hist.iter().rposition(|c| *c > 0);
        let (Some(first), Some(last)) = (first, last) else {
            return Vec::new();
        };
        let top = self.hist[first..=last].iter().copied().max().unwrap_or(1);
        (first..=last)
            .map(|b| {
                let (from, to) = bucket_range(b);
                let count = self.hist[b];
                let bar = "@".repeat((count * 52).div_ceil(top) as usize);
                vec![
                    from.map_or(Cell::Null, Cell::Int),
                    to.map_or(Cell::Null, Cell::Int),
                    Cell::Int(count.cast_signed()),
                    Cell::Text(bar),
                ]
            })
            .collect()
    }
}

/// The nearest-rank `q`-quantile: the smallest value with at least
/// `ceil(q * n)` values at or below it.
pub fn select(values: &mut [i64], q: f64) -> Option<i64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    #[expect(
        clippy::cast_sign_loss,
        reason = "q is in 0..=1, so the rank is not negative"
    )]
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(*values.select_nth_unstable(rank - 1).1)
}

/// bpftrace's `hist()` buckets: 0 holds negatives, 1 holds 0, and `k >= 2`
/// holds `[2^(k-2), 2^(k-1))`.
pub(crate) fn bucket(value: i64) -> usize {
    match value {
        v if v < 0 => 0,
        0 => 1,
        v => 65 - v.leading_zeros() as usize,
    }
}

/// The lower edges of [`bucket`]'s buckets 1 and up (0, 1, 2, 4, … 2^62):
/// bucket `b` holds the values from edge `b - 1` up to edge `b`.
pub fn hist_edges() -> Vec<i64> {
    std::iter::once(0)
        .chain((0..63).map(|shift| 1i64 << shift))
        .collect()
}

/// The value range of bucket `b`; `None` for an open end.
fn bucket_range(b: usize) -> (Option<i64>, Option<i64>) {
    match b {
        0 => (None, Some(0)),
        1 => (Some(0), Some(1)),
        b => (
            Some(1i64 << (b - 2)),
            1i64.checked_shl(b as u32 - 1).filter(|v| *v > 0),
        ),
    }
}

/// Groups of accumulators keyed by the group-by values.
#[derive(Debug)]
pub struct Groups<T = Acc> {
    /// Each group's key and its accumulators, one per spec, in the order
    /// the groups were first seen.
    pub groups: Vec<(Vec<i64>, Vec<T>)>,
    /// Where each key is in `groups`.
    at: HashMap<Vec<i64>, usize>,
    /// The group asked for last: a scan meets the same group many times
    /// in a row (one time bucket, a flood of one syscall), and comparing
    /// a short key is cheaper than hashing it.
    last: usize,
}

impl<T> Default for Groups<T> {
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            at: HashMap::new(),
            last: 0,
        }
    }
}

impl<T: Clone + Default> Groups<T> {
    /// The accumulators of the group `key`.
    pub fn get(&mut self, key: &[i64], specs: usize) -> &mut Vec<T> {
        if self.groups.get(self.last).is_none_or(|(k, _)| k != key) {
            self.last = if let Some(at) = self.at.get(key) {
                *at
            } else {
                self.at.insert(key.to_vec(), self.groups.len());
                self.groups.push((key.to_vec(), vec![T::default(); specs]));
                self.groups.len() - 1
            };
        }
        &mut self.groups[self.last].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_is_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).collect();
        assert_eq!(select(&mut v, 0.5), Some(50));
        assert_eq!(select(&mut v, 0.99), Some(99));
        assert_eq!(select(&mut v, 0.9999), Some(100));
        assert_eq!(select(&mut v, 0.0), Some(1));
        assert_eq!(select(&mut [], 0.5), None);
    }

    #[test]
    fn quantile_names_trim_zeros() {
        assert_eq!(quantile_name(0.9999), "p99.99");
        assert_eq!(quantile_name(0.5), "p50");
        assert_eq!(quantile_name(0.999), "p99.9");
    }

    #[test]
    fn hist_edges_bound_the_buckets() {
        let edges = hist_edges();
        for v in [
            i64::MIN,
            -1,
            0,
            1,
            2,
            3,
            4,
            1000,
            1 << 40,
            (1 << 62) - 1,
            1 << 62,
            i64::MAX,
        ] {
            assert_eq!(edges.partition_point(|e| *e <= v), bucket(v), "{v}");
        }
    }

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(-5), 0);
        assert_eq!(bucket(0), 1);
        assert_eq!(bucket(1), 2);
        assert_eq!(bucket(2), 3);
        assert_eq!(bucket(3), 3);
        assert_eq!(bucket(4), 4);
        assert_eq!(bucket_range(3), (Some(2), Some(4)));
        assert_eq!(bucket_range(64), (Some(1 << 62), None));
        for v in [1i64, 7, 1000, i64::MAX] {
            let (from, to) = bucket_range(bucket(v));
            assert!(from.unwrap() <= v && to.is_none_or(|t| v < t), "{v}");
        }
    }
}
