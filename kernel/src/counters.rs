//! A probe's per-CPU counters, read from the memory of their mmapable array
//! (see `weft_abi::counters`): reading them never makes a `bpf()` call, so
//! weft's own reads never stop the kernel running a probe.

use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    sync::atomic::Ordering,
};

use aya::{Ebpf, maps::Map};
use weft_abi::mapping::Mapping;

use crate::error::{Context as _, Result, bail};

/// The counters of one array: `row` slots per CPU, `cpus` rows.
pub struct CounterArray {
    memory: Mapping,
    cpus: usize,
    row: usize,
}

impl CounterArray {
    /// Maps the array `name` of `ebpf`, which its loader made `cpus * row`
    /// entries long.
    pub fn map(ebpf: &Ebpf, name: &str, cpus: u32, row: u32) -> Result<Self> {
        let Some(Map::Array(map)) = ebpf.map(name) else {
            bail!("the probe has no counter array {name}");
        };
        let (cpus, row) = (cpus as usize, row as usize);
        let memory = Mapping::array(map.fd().as_fd().as_raw_fd(), cpus * row * 8, false)
            .context("failed to map the probe's counters")?;
        Ok(Self { memory, cpus, row })
    }

    /// Slot `slot` of each CPU's row.
    pub fn per_cpu(&self, slot: u32) -> Vec<u64> {
        (0..self.cpus)
            .map(|cpu| {
                let offset = (cpu * self.row + slot as usize) * 8;
                self.memory.word(offset).load(Ordering::Relaxed)
            })
            .collect()
    }
}
