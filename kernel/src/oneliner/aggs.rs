//! The aggregations the kernel keeps for probes whose every action it can
//! aggregate (`weft_oneliner`'s `Attach::agg`), read back when their maps
//! print, and the start times it keeps (`Attach::start`), read back once
//! the probes are detached.

use std::collections::HashMap;

use crate::error::{Context as _, Result};
use aya::{
    Ebpf,
    maps::{HashMap as KernelMap, MapData, PerCpuHashMap},
};
use weft_abi::oneliner::{AGGS_MAP, AggKey, AggValue, STARTS_MAP, StartKey};
use weft_oneliner::KernelAggs;

/// The kernel's aggregation and start-time maps, taken from the loaded
/// object.
pub struct Aggs {
    aggs: PerCpuHashMap<MapData, AggKey, AggValue>,
    starts: KernelMap<MapData, StartKey, u64>,
}

impl Aggs {
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self> {
        let mut take = |name| {
            ebpf.take_map(name)
                .with_context(|| format!("the trace object has no map {name}"))
        };
        Ok(Self {
            aggs: PerCpuHashMap::try_from(take(AGGS_MAP)?)?,
            starts: KernelMap::try_from(take(STARTS_MAP)?)?,
        })
    }
}

impl KernelAggs for Aggs {
    fn entries(&mut self) -> Vec<(AggKey, AggValue)> {
        let mut entries: HashMap<AggKey, AggValue> = HashMap::new();
        for (key, per_cpu) in self.aggs.iter().filter_map(Result::ok) {
            let total = entries.entry(key).or_insert(AggValue::EMPTY);
            // A CPU that never saw the key holds zeros, not an empty
            // value: the kernel fills only the inserting CPU's.
            for value in per_cpu.iter().filter(|v| v.count > 0) {
                total.merge(value);
            }
        }
        entries.into_iter().collect()
    }

    fn starts(&mut self) -> Vec<(StartKey, u64)> {
        self.starts.iter().filter_map(Result::ok).collect()
    }
}
