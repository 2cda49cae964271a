//! The values a sealed chunk holds in one bin of an index, kept between
//! queries. An exact percentile reads the chunks that hold its bin; the
//! UI asks the same percentiles every second over a sliding window, so
//! without this it would decode the whole window each time rather than
//! only the chunks sealed since. Sealed chunks never change, so an entry
//! never goes stale; the oldest chunks are dropped first when the cache
//! is full, as a sliding window drops them.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use crate::schema::IndexId;

/// One chunk's values in one bin, ascending, each with how often it occurs.
pub(crate) type Runs = Arc<[(i64, u32)]>;

/// Bytes the cache may hold.
const BUDGET: usize = 64 << 20;

/// What an entry costs beyond its runs (key, map node, `Arc`).
const ENTRY_COST: usize = 64;

#[derive(Default)]
pub(crate) struct BinCache(Mutex<State>);

#[derive(Default)]
struct State {
    /// By chunk, index and global bin.
    entries: BTreeMap<(u64, IndexId, u32), Runs>,
    bytes: usize,
}

impl BinCache {
    pub fn get(&self, chunk: u64, index: IndexId, bin: u32) -> Option<Runs> {
        let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.entries.get(&(chunk, index, bin)).cloned()
    }

    pub fn put(&self, chunk: u64, index: IndexId, bin: u32, runs: Runs) {
        let cost = ENTRY_COST + std::mem::size_of_val(&*runs);
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = state.entries.insert((chunk, index, bin), runs) {
            state.bytes -= ENTRY_COST + std::mem::size_of_val(&*old);
        }
        state.bytes += cost;
        while state.bytes > BUDGET {
            let Some((_, old)) = state.entries.pop_first() else {
                break;
            };
            state.bytes -= ENTRY_COST + std::mem::size_of_val(&*old);
        }
    }
}

/// `values` (reordered) as ascending runs of equal values.
pub(crate) fn runs(values: &mut [i64]) -> Runs {
    values.sort_unstable();
    let mut runs: Vec<(i64, u32)> = Vec::new();
    for &value in values.iter() {
        match runs.last_mut() {
            Some((last, n)) if *last == value && *n < u32::MAX => *n += 1,
            _ => runs.push((value, 1)),
        }
    }
    runs.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_count_each_value_in_order() {
        let runs = runs(&mut [5, 3, 5, 5, -1, 3]);
        assert_eq!(&*runs, &[(-1, 1), (3, 2), (5, 3)]);
    }

    #[test]
    fn a_full_cache_drops_the_oldest_chunks_first() {
        let cache = BinCache::default();
        let big: Runs = vec![(0, 1); BUDGET / 16 / 2].into();
        cache.put(1, 1, 0, Arc::clone(&big));
        cache.put(2, 1, 0, Arc::clone(&big));
        cache.put(3, 1, 0, big);
        assert!(cache.get(1, 1, 0).is_none());
        assert!(cache.get(3, 1, 0).is_some());
        let state = cache.0.lock().unwrap();
        assert!(state.bytes <= BUDGET);
    }
}
