//! perf.data files come from other machines and may be torn or hostile:
//! reading one, and its queues' traces, must end with data or an error
//! naming an offset, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_pt::perf::PerfData;

fuzz_target!(|data: &[u8]| {
    if let Ok(perf) = PerfData::parse(data) {
        for queue in &perf.queues {
            let _ = queue.trace(data);
            if let Ok(cpu) = u32::try_from(queue.cpu) {
                let _ = perf.switches_on(cpu);
            }
        }
        if let Some(info) = &perf.info {
            let _ = info.clocks();
        }
    }
});
