//! Each syscall's latency as a Prometheus histogram: cumulative counts of
//! durations at or below fixed edges, since the recording started, so that
//! `histogram_quantile(0.99, sum by (le) (rate(..._bucket[1m])))` over many
//! hosts is a correct fleet quantile (quantiles of hosts cannot be merged;
//! bucket counts can).
//!
//! The edges are those of the fleet query's bins (`weft_query::fleet::wire`)
//! at each power of two and half way to the next (`2^k` and `1.5 * 2^k` ns,
//! 64 ns to 68.7 s): a quantile read from them is within one bucket of the
//! exact one, a bucket being at most a third of its edge wide.

use std::{
    fmt::Write as _,
    sync::{Arc, Mutex, PoisonError},
};

use weft_abi::syscall_names;

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

/// One syscall's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Per bucket (not cumulative), the last for `+Inf` alone.
    pub buckets: Vec<u64>,
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
                ..Counts::default()
            })
        });
        counts.buckets[bucket(ns)] += 1;
        counts.sum_ns += u128::from(ns);
        counts.count += 1;
    }

    /// Copies these counts to where scrapes read them.
    pub fn publish(&self, to: &Shared) {
        to.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone_from(self);
    }

    /// The histogram in Prometheus's text format.
    pub fn text(&self, out: &mut String) {
        let metric = "weft_syscall_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {metric} Syscall durations since the recording started, per syscall: sum the buckets by le across hosts for fleet quantiles.\n# TYPE {metric} histogram"
        );
        for (nr, counts) in self.by_nr.iter().enumerate() {
            let Some(counts) = counts else { continue };
            let name = u32::try_from(nr)
                .ok()
                .and_then(syscall_names::name)
                .map_or_else(|| format!("syscall_{nr}"), str::to_owned);
            let mut below = 0;
            for (i, n) in counts.buckets[..EDGES].iter().enumerate() {
                below += n;
                let le = edge(i) as f64 / 1e9;
                let _ = writeln!(
                    out,
                    "{metric}_bucket{{syscall=\"{name}\",le=\"{le:e}\"}} {below}"
                );
            }
            let _ = writeln!(
                out,
                "{metric}_bucket{{syscall=\"{name}\",le=\"+Inf\"}} {}",
                counts.count
            );
            let _ = writeln!(
                out,
                "{metric}_sum{{syscall=\"{name}\"}} {}",
                counts.sum_ns as f64 / 1e9
            );
            let _ = writeln!(out, "{metric}_count{{syscall=\"{name}\"}} {}", counts.count);
        }
    }
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
        let mut text = String::new();
        latencies.text(&mut text);
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
}
