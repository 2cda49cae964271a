//! Finding summaries by key in an encoded run of them (a chunk's, a
//! group's, a rollup's: ascending by source, index and bin), without
//! decoding the rest.

use crate::{
    format::{GroupEntry, SUMMARY_LEN, Summary},
    schema::{IndexId, SourceId},
};

/// Summaries a reader wants: of one source and index, bins in a range.
pub(crate) type KeyRange = (SourceId, IndexId, std::ops::RangeInclusive<u32>);

/// Whether `key` lies in one of `keys`.
pub(crate) fn wanted(keys: &[KeyRange], (source, index, bin): (SourceId, IndexId, u32)) -> bool {
    keys.iter()
        .any(|(s, i, bins)| *s == source && *i == index && bins.contains(&bin))
}

/// [`matching`], trusted: the summaries just before and just after the
/// range found must pass their checksums (and belong to `chunk`), or the
/// position of the first that does not is the error. Summaries stay at
/// their places, so intact neighbours below and above the key prove that
/// the range is where the key's summaries were written, however damage
/// elsewhere misled the search; without this, zeroed summaries made keys
/// look absent and answers come out short.
pub(crate) fn found(
    raw: &[u8],
    key: &KeyRange,
    hint: &mut usize,
    chunk: u64,
) -> std::result::Result<std::ops::Range<usize>, usize> {
    let range = matching(raw, key, hint);
    let n = raw.len() / SUMMARY_LEN;
    let neighbours = [
        range.start.checked_sub(1),
        (range.end < n).then_some(range.end),
    ];
    for i in neighbours.into_iter().flatten() {
        if Summary::decode(&raw[i * SUMMARY_LEN..]).is_none_or(|s| s.chunk != chunk) {
            return Err(i);
        }
    }
    Ok(range)
}

/// Positions of the encoded summaries in `raw` (one chunk's, ascending by
/// key) whose key lies in `key`. Chunks in a row hold their summaries in
/// much the same places, so `hint` (where the range began in the last
/// chunk, updated) is tried first; binary search only when it misses. The
/// range is walked from its start: its summaries are decoded anyway.
fn matching(
    raw: &[u8],
    (source, index, bins): &KeyRange,
    hint: &mut usize,
) -> std::ops::Range<usize> {
    let n = raw.len() / SUMMARY_LEN;
    let key =
        |i: usize| Summary::key(&raw[i * SUMMARY_LEN..]).unwrap_or((u16::MAX, u16::MAX, u32::MAX));
    let lo = (*source, *index, *bins.start());
    let hi = (*source, *index, *bins.end());
    let starts_at = |i: usize| (i == 0 || key(i - 1) < lo) && (i == n || key(i) >= lo);
    let from = if *hint <= n && starts_at(*hint) {
        *hint
    } else {
        partition_point(n, |i| key(i) < lo)
    };
    *hint = from;
    let len = (from..n).take_while(|i| key(*i) <= hi).count();
    from..from + len
}

/// The first `i` in `0..n` for which `pred` is false (`pred` is monotone).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The summaries in `raw` (an entry's of runs of chunks merged, ascending
/// by key) that `keys` want (all, without), each checked; `Err(i)`: the
/// `i`-th fails its checksum or names another entry's first chunk.
pub(crate) fn entry_summaries(
    raw: &[u8],
    entry: &GroupEntry,
    keys: Option<&[KeyRange]>,
) -> std::result::Result<Vec<Summary>, usize> {
    let decode = |i: usize| {
        Summary::decode(&raw[i * SUMMARY_LEN..])
            .filter(|s| s.chunk == entry.first_chunk)
            .ok_or(i)
    };
    let Some(keys) = keys else {
        return (0..raw.len() / SUMMARY_LEN).map(decode).collect();
    };
    let mut summaries = Vec::new();
    for key in keys {
        for i in found(raw, key, &mut 0, entry.first_chunk)? {
            summaries.push(decode(i)?);
        }
    }
    Ok(summaries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_finds_each_key_range_of_a_sorted_chunk() {
        let keys = [
            (0, 0, 0),
            (0, 2, 1),
            (0, 2, 5),
            (0, 2, 9),
            (1, 0, 0),
            (1, 3, 4),
        ];
        let raw: Vec<u8> = keys
            .iter()
            .flat_map(|&(source, index, bin)| {
                Summary {
                    source,
                    index,
                    bin,
                    ..Summary::default()
                }
                .encode()
            })
            .collect();
        assert_eq!(matching(&raw, &(0, 2, 0..=u32::MAX), &mut 0), 1..4);
        assert_eq!(matching(&raw, &(0, 2, 2..=9), &mut 5), 2..4);
        assert_eq!(matching(&raw, &(0, 2, 6..=8), &mut 3), 3..3);
        assert_eq!(matching(&raw, &(1, 0, 0..=u32::MAX), &mut 4), 4..5);
        assert_eq!(matching(&raw, &(2, 0, 0..=u32::MAX), &mut 99).len(), 0);
        assert_eq!(matching(&[], &(0, 0, 0..=0), &mut 1), 0..0);
        assert!(wanted(&[(1, 3, 0..=4)], (1, 3, 4)));
        assert!(!wanted(&[(1, 3, 0..=4)], (1, 2, 4)));
    }
}
