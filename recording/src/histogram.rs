//! Each syscall's latency as a Prometheus histogram: cumulative counts of
//! durations at or below fixed edges, since the recording started, so that
//! `histogram_quantile(0.99, sum by (le) (rate(..._bucket[1m])))` over many
//! hosts is a correct fleet quantile (quantiles of hosts cannot be merged;
//! bucket counts can).
//!
//! The classic buckets' edges are those of the fleet query's bins
//! (`weft_query::fleet::wire`) at each power of two and half way to the
//! next (`2^k` and `1.5 * 2^k` ns, 64 ns to 68.7 s): a quantile read from
//! them is within one bucket of the exact one, a bucket being at most a
//! third of its edge wide. The same durations are also counted in native
//! (sparse) buckets of schema 3, each 2^(1/8) (9 %) wider than the one
//! before, over every duration from 1 ns: a Prometheus server with native
//! histograms on takes those (`exposition.rs`), and `histogram_quantile`
//! over their sum is within 9 % of a fleet quantile.

use std::sync::{Arc, Mutex, PoisonError};

use weft_abi::syscall_names;

use crate::exposition::{Bucket, BucketSpan, Histogram, Kind, Metric, MetricFamily, label_pairs};

/// The smallest edge's power of two: 64 ns.
const FIRST_POWER: u32 = 6;

/// The largest edge's power of two: 2^36 ns, 68.7 s.
const LAST_POWER: u32 = 36;

/// Edges: two per power of two, then the last power itself.
pub const EDGES: usize = 2 * (LAST_POWER - FIRST_POWER) as usize + 1;

/// The upper edge of bucket `i`, in ns: values at or below it (and above
/// the edge before) count there.
pub fn edge(i: usize) -> u64 {
    let power = FIRST_POWER + (i / 2) as u32;
    if i.is_multiple_of(2) {
        1 << power
    } else {
        3 << (power - 1)
    }
}

/// The bucket of a duration of `ns`: the first whose edge is at or above
/// it, [`EDGES`] for those above every edge (`+Inf` only).
pub fn bucket(ns: u64) -> usize {
    if ns <= 1 << FIRST_POWER {
        return 0;
    }
    // Above the edges' range: +Inf only.
    if ns > 1 << LAST_POWER {
        return EDGES;
    }
    // `ns - 1` lies in [2^p, 2^(p+1)); its half says which edge is next.
    let below = ns - 1;
    let power = below.ilog2();
    let upper_half = (below >> (power - 1)) & 1;
    2 * (power - FIRST_POWER) as usize + upper_half as usize + 1
}

/// The native buckets' schema: each power of two split in 2^3.
pub const SCHEMA: i32 = 3;

/// The native bucket of 1 ns: 1e-9 s lies in (2^(-240/8), 2^(-239/8)].
const NATIVE_FIRST: i32 = -239;

/// Prometheus's index of the native bucket at place `j` from
/// [`NATIVE_FIRST`].
fn native_index(j: usize) -> i32 {
    NATIVE_FIRST + i32::try_from(j).expect("fewer native buckets than i32 holds")
}

/// Native buckets from 1 ns to `u64::MAX` ns (2^(273/8) s is above it).
const NATIVES: usize = 513;

/// The upper edge of each native bucket, ns (`2^(i/8)` s, rounded down;
/// `u64::MAX` past the largest).
fn native_edges() -> &'static [u64; NATIVES] {
    static EDGES: std::sync::OnceLock<[u64; NATIVES]> = std::sync::OnceLock::new();
    EDGES.get_or_init(|| {
        std::array::from_fn(|j| {
            let i = native_index(j);
            // A power of two is exact this way; `exp2` of a fraction is
            // within an ulp, as Prometheus's own float edges are.
            let seconds = if i % 8 == 0 {
                2f64.powi(i / 8)
            } else {
                (f64::from(i) / 8.0).exp2()
            };
            #[allow(clippy::cast_sign_loss, reason = "positive; saturates past u64::MAX")]
            let ns = (seconds * 1e9) as u64;
            ns
        })
    })
}

/// The native bucket of a duration of `ns` (at least 1), as its place
/// from [`NATIVE_FIRST`]: the first whose edge is at or above it.
pub fn native_bucket(ns: u64) -> usize {
    native_edges().partition_point(|edge| *edge < ns)
}

/// One syscall's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Per bucket (not cumulative), the last for `+Inf` alone.
    pub buckets: Vec<u64>,
    /// Per native bucket, from [`NATIVE_FIRST`]; durations of 0 ns in
    /// `zero`.
    pub native: Vec<u64>,
    pub zero: u64,
    /// Sum of the durations, ns.
    pub sum_ns: u128,
    /// Durations counted.
    pub count: u64,
}

/// The counts of every syscall seen, by number.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    by_nr: Vec<Option<Box<Counts>>>,
}

/// The recorder's counts, published each second for scrapes to read.
pub type Shared = Arc<Mutex<Latencies>>;

impl Latencies {
    /// Counts a syscall `nr` of `ns`.
    #[inline]
    pub fn add(&mut self, nr: u32, ns: u64) {
        let nr = nr as usize;
        if self.by_nr.len() <= nr {
            self.by_nr.resize(nr + 1, None);
        }
        let counts = self.by_nr[nr].get_or_insert_with(|| {
            Box::new(Counts {
                buckets: vec![0; EDGES + 1],
                native: vec![0; NATIVES],
                ..Counts::default()
            })
        });
        counts.buckets[bucket(ns)] += 1;
        match ns {
            0 => counts.zero += 1,
            _ => counts.native[native_bucket(ns)] += 1,
        }
        counts.sum_ns += u128::from(ns);
        counts.count += 1;
    }

    /// Copies these counts to where scrapes read them.
    pub fn publish(&self, to: &Shared) {
        to.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone_from(self);
    }

    /// The histogram as a metric family: classic and native buckets.
    pub fn family(&self) -> MetricFamily {
        let mut family = MetricFamily::new(
            "weft_syscall_duration_seconds",
            "Syscall durations since the recording started, per syscall: sum the buckets (by le, or the native histograms) across hosts for fleet quantiles.",
            Kind::Histogram,
        );
        for (nr, counts) in self.by_nr.iter().enumerate() {
            let Some(counts) = counts else { continue };
            let name = u32::try_from(nr)
                .ok()
                .and_then(syscall_names::name)
                .map_or_else(|| format!("syscall_{nr}"), str::to_owned);
            family.metric.push(Metric {
                label: label_pairs(&[("syscall", &name)]),
                histogram: Some(counts.histogram()),
                ..Metric::default()
            });
        }
        family
    }
}

impl Counts {
    fn histogram(&self) -> Histogram {
        let mut below = 0;
        let mut bucket: Vec<Bucket> = self.buckets[..EDGES]
            .iter()
            .enumerate()
            .map(|(i, n)| {
                below += n;
                Bucket {
                    cumulative_count: below,
                    upper_bound: edge(i) as f64 / 1e9,
                }
            })
            .collect();
        bucket.push(Bucket {
            cumulative_count: self.count,
            upper_bound: f64::INFINITY,
        });
        let (positive_span, positive_delta) = spans(&self.native);
        Histogram {
            sample_count: self.count,
            sample_sum: self.sum_ns as f64 / 1e9,
            bucket,
            schema: SCHEMA,
            // Only 0 ns below it; a threshold above 0 also marks the
            // histogram as native for a Prometheus that has no buckets yet.
            zero_threshold: 1e-10,
            zero_count: self.zero,
            positive_span,
            positive_delta,
        }
    }
}

/// Native bucket counts as spans of buckets in use and each bucket's
/// count minus the one before.
fn spans(native: &[u64]) -> (Vec<BucketSpan>, Vec<i64>) {
    let (mut spans, mut deltas) = (Vec::<BucketSpan>::new(), Vec::new());
    let (mut previous_count, mut end) = (0i64, None::<usize>);
    for (j, &n) in native.iter().enumerate() {
        if n == 0 {
            continue;
        }
        match end {
            Some(e) if e == j => spans.last_mut().expect("a span is open").length += 1,
            _ => spans.push(BucketSpan {
                // The first span starts at its index; the others after a gap.
                offset: match end {
                    None => native_index(j),
                    Some(e) => native_index(j - e) - NATIVE_FIRST,
                },
                length: 1,
            }),
        }
        end = Some(j + 1);
        let count = i64::try_from(n).unwrap_or(i64::MAX);
        deltas.push(count - previous_count);
        previous_count = count;
    }
    (spans, deltas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_duration_counts_in_the_first_bucket_whose_edge_holds_it() {
        assert_eq!(edge(0), 64);
        assert_eq!(edge(1), 96);
        assert_eq!(edge(2), 128);
        assert_eq!(edge(EDGES - 1), 1 << 36);
        for ns in [
            0,
            1,
            63,
            64,
            65,
            95,
            96,
            97,
            127,
            128,
            129,
            1000,
            999_999,
            (1 << 36) - 1,
            1 << 36,
        ] {
            let b = bucket(ns);
            assert!(ns <= edge(b), "{ns} above bucket {b}'s edge");
            assert!(
                b == 0 || ns > edge(b - 1),
                "{ns} at or below bucket {}'s edge",
                b - 1
            );
        }
        assert_eq!(bucket((1 << 36) + 1), EDGES);
        for i in 1..EDGES {
            // Edges are fleet-bin edges: a multiple of an eighth of their power of two.
            let e = edge(i);
            assert_eq!(e % (1 << (e.ilog2() - 3)), 0, "{e}");
            assert!((e - edge(i - 1)) * 3 <= e, "{e}");
        }
    }

    #[test]
    fn the_text_is_cumulative_per_syscall() {
        let mut latencies = Latencies::default();
        for ns in [50, 100, 100, 5_000, 1 << 40] {
            latencies.add(39, ns);
        }
        let text = crate::exposition::text(&[latencies.family()]);
        assert!(
            text.contains("# TYPE weft_syscall_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"weft_syscall_duration_seconds_bucket{syscall="getpid",le="6.4e-8"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"weft_syscall_duration_seconds_bucket{syscall="getpid",le="1.28e-7"} 3"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"weft_syscall_duration_seconds_bucket{syscall="getpid",le="6.8719476736e1"} 4"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"weft_syscall_duration_seconds_bucket{syscall="getpid",le="+Inf"} 5"#),
            "{text}"
        );
        assert!(
            text.contains(r#"weft_syscall_duration_seconds_count{syscall="getpid"} 5"#),
            "{text}"
        );
    }

    #[test]
    fn native_buckets_are_prometheus_schema_3_from_one_second() {
        let place = |ns| native_index(native_bucket(ns));
        // Bucket i holds (2^((i-1)/8), 2^(i/8)] seconds.
        assert_eq!(place(1_000_000_000), 0);
        assert_eq!(place(1_000_000_001), 1);
        assert_eq!(place(500_000_000), -8);
        assert_eq!(place(500_000_001), -7);
        assert_eq!(place(1), -239);
        assert_eq!(place(1_090_507_732), 1, "2^(1/8) s");
        assert_eq!(place(1_090_507_733), 2);
        assert_eq!(native_bucket(u64::MAX), NATIVES - 1);
        let mut latencies = Latencies::default();
        for ns in [
            1_000_000_000,
            1_000_000_000,
            1_000_000_001,
            4_000_000_000,
            0,
        ] {
            latencies.add(39, ns);
        }
        let family = latencies.family();
        let h = family.metric[0].histogram.as_ref().unwrap();
        assert_eq!((h.schema, h.zero_count, h.sample_count), (3, 1, 5));
        let spans: Vec<(i32, u32)> = h
            .positive_span
            .iter()
            .map(|s| (s.offset, s.length))
            .collect();
        assert_eq!(spans, [(0, 2), (14, 1)]);
        assert_eq!(h.positive_delta, [2, -1, 0]);
    }
}
