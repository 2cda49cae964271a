//! The overview's latency heatmap: an answer of `hist(x) every T` (a
//! time bucket, a log2 latency bucket and its count per row) laid out as
//! a grid of shades, time across and latency up, darker where more
//! records fell. Shades are characters, so the map reads without colour.

use std::collections::{BTreeMap, BTreeSet};

use weft_query::{Answer, Cell};

/// From none to the most.
const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];

/// A heatmap fitted to a screen area: one line per latency band, the
/// highest first, each its lower bound (ns) and its shades.
#[derive(Debug, PartialEq, Eq)]
pub struct Heat {
    pub bands: Vec<(i64, String)>,
    /// Time buckets shown, the latest last.
    pub columns: usize,
}

/// Lays out `answer` in at most `width` columns (the latest time buckets)
/// and `height` bands (adjacent latency buckets merged until they fit).
/// `None` when the answer holds nothing to show.
pub fn lay_out(answer: &Answer, width: usize, height: usize) -> Option<Heat> {
    let column = |name: &str| answer.columns.iter().position(|c| c.name == name);
    let (time, from, count) = (column("time")?, column("from")?, column("count")?);
    let int = |cell: &Cell| match cell {
        Cell::Int(v) => Some(*v),
        _ => None,
    };
    // Counts by (time, lower bound); the open bucket below 0 is left out.
    let mut counts: BTreeMap<(i64, i64), u64> = BTreeMap::new();
    for row in &answer.rows {
        let (Some(t), Some(lo), Some(n)) = (int(&row[time]), int(&row[from]), int(&row[count]))
        else {
            continue;
        };
        *counts.entry((t, lo)).or_default() += n.unsigned_abs();
    }
    let times: Vec<i64> = (counts.keys().map(|(t, _)| *t))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let times = &times[times.len().saturating_sub(width.max(1))..];
    let bounds: Vec<i64> = (counts.keys().map(|(_, lo)| *lo))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if times.is_empty() || bounds.is_empty() || height == 0 {
        return None;
    }
    // Adjacent buckets per band, so that every bucket from the lowest to
    // the highest seen has a band.
    let (low, high) = (bucket_of(bounds[0]), bucket_of(*bounds.last()?));
    let per_band = (high - low + 1).div_ceil(height);
    let band_of = |lo: i64| (bucket_of(lo) - low) / per_band;
    let bands = (high - low) / per_band + 1;
    let mut grid = vec![vec![0u64; times.len()]; bands];
    for ((t, lo), n) in &counts {
        if let Ok(x) = times.binary_search(t) {
            grid[band_of(*lo)][x] += n;
        }
    }
    let max = grid.iter().flatten().copied().max().unwrap_or(0);
    let lines = (0..bands)
        .rev()
        .map(|band| {
            let lower = lower_bound(low + band * per_band);
            (lower, grid[band].iter().map(|n| shade(*n, max)).collect())
        })
        .collect();
    Some(Heat {
        bands: lines,
        columns: times.len(),
    })
}

/// The log2 bucket of a lower bound: 0 for 0, `k + 1` for `2^k`.
fn bucket_of(lower: i64) -> usize {
    if lower <= 0 {
        0
    } else {
        lower.ilog2() as usize + 1
    }
}

/// The lower bound of log2 bucket `b` (see [`bucket_of`]).
fn lower_bound(b: usize) -> i64 {
    match b {
        0 => 0,
        b => 1i64 << (b - 1).min(62),
    }
}

/// The shade of `n` of at most `max`, on a log scale: a band of 10 records
/// beside one of a million still shows.
fn shade(n: u64, max: u64) -> char {
    if n == 0 || max == 0 {
        return SHADES[0];
    }
    let level = ((n as f64).ln_1p() / (max as f64).ln_1p() * 4.0).ceil();
    #[expect(
        clippy::cast_sign_loss,
        clippy::cast_possible_truncation,
        reason = "clamped to 1..=4"
    )]
    SHADES[level.clamp(1.0, 4.0) as usize]
}

#[cfg(test)]
mod tests {
    use weft_query::{Header, Kind};

    use super::*;

    fn answer(rows: &[(i64, i64, i64)]) -> Answer {
        let header = |name: &str| Header {
            name: name.into(),
            kind: Kind::Int,
        };
        Answer {
            columns: ["time", "from", "to", "count"].map(header).to_vec(),
            rows: rows
                .iter()
                .map(|(t, lo, n)| vec![Cell::Int(*t), Cell::Int(*lo), Cell::Null, Cell::Int(*n)])
                .collect(),
            ..Answer::default()
        }
    }

    #[test]
    fn time_goes_across_and_latency_up_darker_where_more() {
        // Two steps: most calls at 256 ns, a few at 1 ms in the second.
        let heat = lay_out(
            &answer(&[(0, 256, 1000), (1, 256, 900), (1, 1 << 20, 3)]),
            80,
            40,
        )
        .unwrap();
        assert_eq!(heat.columns, 2);
        // Buckets from 256 ns (2^8) to 1 ms (2^20), each a band.
        assert_eq!(heat.bands.len(), 13);
        assert_eq!(heat.bands[0], (1 << 20, " ░".into()));
        assert_eq!(heat.bands[12], (256, "██".into()));
        assert!(heat.bands[1..12].iter().all(|(_, s)| s == "  "));
    }

    #[test]
    fn it_fits_the_area_by_merging_bands_and_keeping_the_latest_steps() {
        let rows: Vec<(i64, i64, i64)> = (0..100).map(|t| (t, 1 << (t % 30), 5)).collect();
        let heat = lay_out(&answer(&rows), 20, 6).unwrap();
        assert_eq!(heat.columns, 20);
        assert!(heat.bands.len() <= 6, "{heat:?}");
        assert!(heat.bands.iter().all(|(_, s)| s.chars().count() == 20));
        // Every step of the last 20 has its one bucket somewhere.
        for x in 0..20 {
            let marked = heat
                .bands
                .iter()
                .filter(|(_, s)| s.chars().nth(x) != Some(' '));
            assert_eq!(marked.count(), 1, "column {x}: {heat:?}");
        }
        assert_eq!(lay_out(&answer(&[]), 20, 6), None);
    }
}
