//! The aggregations the kernel keeps for probes whose every action it can
//! aggregate (`weft_oneliner`'s `Attach::agg`), read back when their maps
//! print.

use std::collections::HashMap;

use anyhow::{Context as _, Result};
use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap},
};
use weft_abi::oneliner::{AGGS_MAP, AggKey, AggValue};
use weft_oneliner::KernelAggs;

/// The kernel's aggregation map, taken from the loaded object.
pub struct Aggs(PerCpuHashMap<MapData, AggKey, AggValue>);

impl Aggs {
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self> {
        let map = ebpf
            .take_map(AGGS_MAP)
            .context("the trace object has no aggregation map")?;
        Ok(Self(PerCpuHashMap::try_from(map)?))
    }
}

impl KernelAggs for Aggs {
    fn entries(&mut self) -> Vec<(AggKey, AggValue)> {
        let mut entries: HashMap<AggKey, AggValue> = HashMap::new();
        for (key, per_cpu) in self.0.iter().filter_map(Result::ok) {
            let total = entries.entry(key).or_insert(AggValue::EMPTY);
            // A CPU that never saw the key holds zeros, not an empty
            // value: the kernel fills only the inserting CPU's.
            for value in per_cpu.iter().filter(|v| v.count > 0) {
                total.merge(value);
            }
        }
        entries.into_iter().collect()
    }
}
