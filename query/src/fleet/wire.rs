//! What the asker and the hosts of a fleet query send each other, and the
//! log-spaced bins every host counts a quantile's values in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{aggregate::bucket, ast::Func, catalog::Kind};

/// One request to one host: the query and what is wanted of it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Request {
    /// The query text, as the user wrote it.
    pub query: String,
    /// Which phase.
    pub ask: Ask,
    /// Count quantiles in [`bin_of`]'s bins by reading the records, even
    /// where summaries could answer: for hosts whose indexes bin a column
    /// differently.
    #[serde(default)]
    pub scan: bool,
    /// A correlation's anchors over the whole fleet, wall-clock ns
    /// (`around`'s or `during`'s intervals): each host keeps its records
    /// inside them instead of running the sub-query on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchors: Option<Vec<(i64, i64)>>,
}

/// Anchors a host sends at most: a correlation over more, across hosts,
/// is refused (narrow its sub-query).
pub const MAX_ANCHORS: usize = 100_000;

/// The two phases of a fleet query.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    /// Every group's mergeable aggregates ([`Group`]).
    Partials,
    /// The values inside ranges of quantile aggregates' columns ([`Slice`],
    /// one per want): the bin a merged quantile falls in, or a narrower
    /// range inside it.
    Values(Vec<Want>),
    /// The correlation's anchors on this host ([`Anchor`]).
    Anchors,
}

/// One anchor record of a correlation, as a host sends it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Anchor {
    /// Its interval's start, wall-clock ns since the epoch.
    pub start: i64,
    /// Its interval's end.
    pub end: i64,
    /// For a `max(x)` or `min(x)` sub-query, its `x`: the asker keeps the
    /// fleet's extreme.
    pub value: Option<i64>,
}

/// The values of one group's aggregate between `lo` and `hi` (inclusive).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Want {
    /// The group's key.
    pub key: Vec<Key>,
    /// Which aggregate of the stage (its position).
    pub agg: usize,
    /// The smallest value wanted.
    pub lo: i64,
    /// The largest value wanted.
    pub hi: i64,
}

/// One cell of a group's key as every host writes it: names as text, so
/// that `comm = "nginx"` is one group on every host whatever its number.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    /// No value.
    Null,
    /// A number (a time bucket is wall-clock ns).
    Int(i64),
    /// A name or an address.
    Text(String),
}

/// How a column's numbers print, as hosts tell the asker.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Shown {
    /// A plain number.
    Int,
    /// Nanoseconds of duration.
    Duration,
    /// A wall-clock time in ns since the epoch.
    Time,
    /// Text.
    Text,
}

impl Shown {
    /// How a column of `kind` shows once its values crossed hosts.
    pub fn of(kind: &Kind) -> Self {
        match kind {
            Kind::Int => Self::Int,
            Kind::Duration => Self::Duration,
            Kind::Time => Self::Time,
            Kind::Named(_) | Kind::Addr(_) | Kind::Bytes | Kind::Hex | Kind::Id(_) => Self::Text,
        }
    }

    /// The kind an answer's header takes.
    pub fn kind(self) -> Kind {
        match self {
            Self::Int => Kind::Int,
            Self::Duration => Kind::Duration,
            Self::Time => Kind::Time,
            Self::Text => Kind::Bytes,
        }
    }
}

/// A host's answer to one [`Request`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    /// The answer's columns: the group key's (a time bucket first if
    /// `every`, then the `by` fields), then the aggregates'.
    pub columns: Vec<(String, Shown)>,
    /// How many of the columns make the key.
    pub keys: usize,
    /// [`Ask::Partials`]: each group's aggregates, in the stage's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Group>,
    /// [`Ask::Values`]: one slice per want, in the wants' order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<Slice>,
    /// [`Ask::Anchors`]: the correlation's anchors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anchors: Vec<Anchor>,
    /// Records the host's scan visited.
    pub scanned: u64,
    /// Their payload bytes: what shipping them would have cost.
    pub scanned_bytes: u64,
}

/// One group's key and its aggregates.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Group {
    /// The key's cells.
    pub key: Vec<Key>,
    /// One per aggregate of the stage.
    pub parts: Vec<Part>,
}

/// One aggregate of one group on one host, in a form that merges with the
/// same aggregate of other hosts: counts, sums and extremes add up; a
/// quantile's values are counted per [`bin_of`] bin, a `hist`'s per
/// power-of-two bucket.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Part {
    /// Values counted.
    pub count: u64,
    /// Their sum.
    pub sum: i128,
    /// The smallest.
    pub min: Option<i64>,
    /// The largest.
    pub max: Option<i64>,
    /// Values per bin, for quantiles.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bins: BTreeMap<i32, u64>,
    /// Values per `hist` bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hist: Vec<u64>,
    /// Which bins `bins` counts in: 0 for [`bin_of`]'s, else a
    /// fingerprint of a store index's edges (answered from its chunk
    /// summaries), the same on every host whose index bins alike.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scheme: u64,
    /// With a store index's bins: the smallest and largest value of each
    /// bin counted (only those: the edges of empty bins need not cross).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ranges: BTreeMap<i32, (i64, i64)>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The fingerprint of a store index's bin `edges` (FNV-1a over their
/// bytes): hosts compare it, not the edges.
pub fn scheme_of(edges: &[i64]) -> u64 {
    edges
        .iter()
        .flat_map(|e| e.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
        .max(1)
}

impl Part {
    /// The count, sum and extremes the store's summaries gave.
    pub fn of(aggregate: &weft_store::Aggregate) -> Self {
        Self {
            count: aggregate.count,
            sum: aggregate.sum,
            min: aggregate.min,
            max: aggregate.max,
            ..Self::default()
        }
    }

    /// Counts one value of an aggregate of `func`.
    pub fn add(&mut self, func: Func, value: i64) {
        self.count += 1;
        self.sum += i128::from(value);
        self.min = Some(self.min.map_or(value, |m| m.min(value)));
        self.max = Some(self.max.map_or(value, |m| m.max(value)));
        match func {
            Func::Quantile(_) | Func::Percentiles => {
                *self.bins.entry(bin_of(value)).or_default() += 1;
            }
            Func::Hist => {
                let b = bucket(value);
                if self.hist.len() <= b {
                    self.hist.resize(b + 1, 0);
                }
                self.hist[b] += 1;
            }
            _ => {}
        }
    }

    /// The smallest and largest value of bin `bin`, in this part's bins.
    pub fn range(&self, bin: i32) -> (i64, i64) {
        if self.scheme == 0 {
            return bin_range(bin);
        }
        self.ranges
            .get(&bin)
            .copied()
            .unwrap_or((i64::MIN, i64::MAX))
    }

    /// Counts `counts` (per bin of a store index whose bins have `edges`:
    /// bin `j` holds `edges[j-1]` up to `edges[j]`) as this part's bins.
    pub fn count_in(&mut self, edges: &[i64], counts: &[u64]) {
        self.scheme = scheme_of(edges);
        for (j, n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let bin = i32::try_from(j).expect("an index has fewer bins than i32 holds");
            let lo = j.checked_sub(1).map_or(i64::MIN, |at| edges[at]);
            let hi = edges.get(j).map_or(i64::MAX, |e| e - 1);
            self.bins.insert(bin, *n);
            self.ranges.insert(bin, (lo, hi));
        }
    }

    /// Adds another host's part of the same aggregate, counted in the
    /// same bins (the asker checks [`Part::scheme`] agrees first).
    pub fn merge(&mut self, other: &Part) {
        self.scheme = self.scheme.max(other.scheme);
        for (bin, range) in &other.ranges {
            self.ranges.insert(*bin, *range);
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = [self.min, other.min].into_iter().flatten().min();
        self.max = [self.max, other.max].into_iter().flatten().max();
        for (bin, n) in &other.bins {
            *self.bins.entry(*bin).or_default() += n;
        }
        if self.hist.len() < other.hist.len() {
            self.hist.resize(other.hist.len(), 0);
        }
        for (mine, theirs) in self.hist.iter_mut().zip(&other.hist) {
            *mine += theirs;
        }
    }
}

/// A host's values inside one want's range.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Slice {
    /// All of them, ascending.
    Values(Vec<i64>),
    /// Too many to send: how many fall in each of [`PIECES`] equal pieces
    /// of the range ([`piece_of`]).
    Counts(Vec<u64>),
}

/// Values a host sends for one want before it sends counts instead.
pub const MAX_VALUES: usize = 4096;

/// The pieces a range too full to send is counted in: each round of
/// narrowing divides the range by this, so a range of all `i64` values
/// is down to one value in eight rounds.
pub const PIECES: usize = 256;

/// The width of each of a range's pieces.
pub fn piece_width(lo: i64, hi: i64) -> u128 {
    let width = (i128::from(hi) - i128::from(lo) + 1).unsigned_abs();
    width.div_ceil(PIECES as u128)
}

/// Which piece of `lo..=hi` holds `value`.
pub fn piece_of(lo: i64, hi: i64, value: i64) -> usize {
    ((i128::from(value) - i128::from(lo)).unsigned_abs() / piece_width(lo, hi)) as usize
}

/// The values of piece `i` of `lo..=hi`.
pub fn piece_range(lo: i64, hi: i64, i: usize) -> (i64, i64) {
    let width = piece_width(lo, hi).cast_signed();
    let from = i128::from(lo) + width * i as i128;
    let to = (from + width - 1).min(i128::from(hi));
    (from as i64, to as i64)
}

/// Values 0 to 15 have a bin each; above, each power of two is split
/// into 8 bins (at most 12.5 % wide, as fine as the store's latency bins),
/// computed with integer arithmetic alone so that every host puts a value
/// in the same bin. Negative values mirror the positive ones.
pub fn bin_of(value: i64) -> i32 {
    if value < 0 {
        -1 - positive_bin((!value).cast_unsigned())
    } else {
        positive_bin(value.cast_unsigned())
    }
}

/// The smallest and largest value of bin `bin`.
pub fn bin_range(bin: i32) -> (i64, i64) {
    if bin >= 0 {
        let (lo, hi) = positive_range(bin);
        (lo.cast_signed(), hi.cast_signed())
    } else {
        let (lo, hi) = positive_range(-1 - bin);
        (!hi.cast_signed(), !lo.cast_signed())
    }
}

fn positive_bin(value: u64) -> i32 {
    if value < 16 {
        return value as i32;
    }
    let power = value.ilog2();
    let sub = (value >> (power - 3)) & 7;
    (16 + (power - 4) * 8 + sub as u32).cast_signed()
}

fn positive_range(bin: i32) -> (u64, u64) {
    let bin = bin.unsigned_abs();
    if bin < 16 {
        return (u64::from(bin), u64::from(bin));
    }
    let (power, sub) = ((bin - 16) / 8 + 4, u64::from((bin - 16) % 8));
    ((8 + sub) << (power - 3), ((9 + sub) << (power - 3)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_every_value_in_order() {
        let samples = [
            i64::MIN,
            i64::MIN + 1,
            -1_000_000,
            -17,
            -16,
            -15,
            -1,
            0,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            123_456_789,
            i64::MAX - 1,
            i64::MAX,
        ];
        for v in samples {
            let (lo, hi) = bin_range(bin_of(v));
            assert!(lo <= v && v <= hi, "{v} not in {lo}..={hi}");
            // The bins next to it start and end where this one does not.
            if lo > i64::MIN {
                assert_eq!(bin_of(lo - 1), bin_of(v) - 1, "{v}");
            }
            if hi < i64::MAX {
                assert_eq!(bin_of(hi + 1), bin_of(v) + 1, "{v}");
            }
        }
        let mut last = i32::MIN;
        for v in samples {
            assert!(bin_of(v) >= last, "{v}");
            last = bin_of(v);
        }
    }

    #[test]
    fn bins_are_at_most_an_eighth_wide() {
        for bin in 16..=bin_of(i64::MAX) {
            let (lo, hi) = bin_range(bin);
            assert!((hi - lo + 1) * 8 <= lo, "bin {bin}: {lo}..={hi}");
        }
    }

    #[test]
    fn pieces_split_a_range() {
        for (lo, hi) in [(0, 9), (100, 100_000), (i64::MIN, i64::MAX), (-5, 1000)] {
            let last = piece_of(lo, hi, hi);
            assert!(last < PIECES);
            assert_eq!(piece_range(lo, hi, 0).0, lo);
            assert_eq!(piece_range(lo, hi, last).1, hi);
            for i in 0..last {
                assert_eq!(piece_range(lo, hi, i).1 + 1, piece_range(lo, hi, i + 1).0);
                let (from, to) = piece_range(lo, hi, i);
                assert_eq!((piece_of(lo, hi, from), piece_of(lo, hi, to)), (i, i));
            }
        }
    }

    #[test]
    fn parts_merge() {
        let mut a = Part::default();
        let mut b = Part::default();
        for v in [5, 100, 1000] {
            a.add(Func::Quantile(0.5), v);
        }
        b.add(Func::Quantile(0.5), -3);
        a.merge(&b);
        assert_eq!(
            (a.count, a.sum, a.min, a.max),
            (4, 1102, Some(-3), Some(1000))
        );
        assert_eq!(a.bins.values().sum::<u64>(), 4);
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Part>(&text).unwrap(), a);
    }
}
