//! The counts the kernel keeps for probes whose only action is `count()`
//! (`weft_oneliner`'s `Attach::count`), read back when their map prints.

use anyhow::{Context as _, Result};
use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap},
};
use weft_abi::oneliner::{COUNT_KEY_COMM, COUNT_KEY_NONE, COUNTS_MAP, CountKey};
use weft_oneliner::{
    KernelCounts,
    value::{Value, c_string},
};

/// The kernel's count map, taken from the loaded object.
pub struct Counts(PerCpuHashMap<MapData, CountKey, u64>);

impl Counts {
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self> {
        let map = ebpf
            .take_map(COUNTS_MAP)
            .context("the trace object has no count map")?;
        Ok(Self(PerCpuHashMap::try_from(map)?))
    }
}

impl KernelCounts for Counts {
    fn counts(&mut self, index: usize) -> Vec<(Vec<Value>, u64)> {
        self.0
            .iter()
            .filter_map(Result::ok)
            .filter(|(key, _)| key.map as usize == index + 1)
            .map(|(key, per_cpu)| (key_values(&key), per_cpu.iter().sum()))
            .collect()
    }
}

/// The map key the kernel's key stands for, as the runtime keys its maps.
fn key_values(key: &CountKey) -> Vec<Value> {
    match key.kind as u8 {
        COUNT_KEY_NONE => Vec::new(),
        COUNT_KEY_COMM => vec![Value::Str(c_string(&key.key))],
        _ => {
            let id = u32::from_le_bytes([key.key[0], key.key[1], key.key[2], key.key[3]]);
            vec![Value::Int(i64::from(id))]
        }
    }
}
