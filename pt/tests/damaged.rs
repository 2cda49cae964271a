//! Damaged traces: every libipt trace with bytes flipped and cut short must
//! list and walk to the end with errors where the damage is, never a panic.
//! (`fuzz/fuzz_targets/pt_trace.rs` explores further with cargo-fuzz.)

mod common;

use weft_pt::dump::{Options, TimeColumn};
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::time::Clocks;

/// A small deterministic generator, so a failure names a reproducible case.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn flipped_and_truncated_traces_decode_without_panics() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut runs = 0;
    let mut errors = 0;
    for case in common::cases() {
        let (trace, image) = (case.trace(), case.image());
        for _ in 0..20 {
            let mut damaged = trace.clone();
            for _ in 0..=rng.next() % 3 {
                let at = (rng.next() % damaged.len().max(1) as u64) as usize;
                if let Some(byte) = damaged.get_mut(at) {
                    *byte ^= 1 << (rng.next() % 8);
                }
            }
            damaged.truncate((rng.next() % (damaged.len() as u64 + 1)) as usize);
            let _ = weft_pt::dump::dump(&damaged, timed(&case), &mut std::io::sink());
            for resync in [false, true] {
                Flow::new(&damaged, &image, case.errata())
                    .with_resync(resync)
                    .run(&mut |step| {
                        if matches!(step, Step::Event(Event::Error { .. }, _)) {
                            errors += 1;
                        }
                    });
            }
            runs += 1;
        }
    }
    eprintln!("{runs} damaged traces decoded, {errors} decoding errors reported");
    assert!(runs > 6000, "{runs} runs");
    assert!(errors > 0, "damage must show as errors somewhere");
}

/// Listing options that track time with every kind of timing packet.
fn timed(case: &common::Case) -> Options {
    Options {
        time: Some(TimeColumn::default()),
        clocks: Clocks {
            mtc_freq: 3,
            ctc_eax: 2,
            ctc_ebx: 170,
            nom_freq: 24,
            ..Clocks::default()
        },
        errata: case.errata(),
        ..Options::default()
    }
}
