//! Losses as records: at each tick (and at the end), what each source lost
//! since the last one goes into the `losses` source — ring-full losses per
//! CPU, the others (full tables, records clients dropped) as one count —
//! so that an answer over a window can say how many of its source's
//! records are missing from it (`weft_query`'s `Answer::lost`).

use std::collections::HashMap;

use crate::error::Result;
use weft_store::{SourceId, Store};

use crate::probe::Accounting;

/// A loss record: the lost source's store id, the CPU (`ANY_CPU` when not
/// counted per CPU), the count, and why.
const SIZE: usize = 24;

/// The CPU of losses not counted per CPU.
pub const ANY_CPU: u32 = u32::MAX;

/// Why records were lost: the ring was full, or anything else.
pub const RING_FULL: u8 = 0;
pub const OTHER: u8 = 1;

/// What each source had lost when last noted.
#[derive(Default)]
pub struct LossLog {
    source: Option<SourceId>,
    /// Per source: ring-full losses per CPU, and the rest.
    noted: HashMap<&'static str, (Vec<u64>, u64)>,
}

impl LossLog {
    /// Appends, at `now`, what each source of `accounting` lost since the
    /// last call (the `losses` source made at the first loss).
    pub fn note(&mut self, store: &mut Store, now: u64, accounting: &Accounting) -> Result<()> {
        for account in &accounting.0 {
            let Some(lost_source) = (store.meta().sources.iter())
                .find(|s| s.name == account.name)
                .map(|s| s.id)
            else {
                continue;
            };
            let per_cpu = account
                .delivery()
                .map(|d| d.ring_full_per_cpu.clone())
                .unwrap_or_default();
            let other = account.lost() - per_cpu.iter().sum::<u64>();
            let (was_per_cpu, was_other) = self.noted.entry(account.name).or_default();
            let mut records = Vec::new();
            for (cpu, count) in per_cpu.iter().enumerate() {
                let before = was_per_cpu.get(cpu).copied().unwrap_or(0);
                if *count > before {
                    records.push((cpu as u32, count - before, RING_FULL));
                }
            }
            if other > *was_other {
                records.push((ANY_CPU, other - *was_other, OTHER));
            }
            (*was_per_cpu, *was_other) = (per_cpu, other);
            for (cpu, lost, why) in records {
                let source = match self.source {
                    Some(source) => source,
                    None => *self
                        .source
                        .insert(weft_capture::sources::own::LOSSES.define(store)?),
                };
                let mut payload = [0u8; SIZE];
                payload[..4].copy_from_slice(&u32::from(lost_source).to_le_bytes());
                payload[4..8].copy_from_slice(&cpu.to_le_bytes());
                payload[8..16].copy_from_slice(&lost.to_le_bytes());
                payload[16] = why;
                store.append_at(source, now, Some(now), &payload)?;
            }
        }
        Ok(())
    }
}
