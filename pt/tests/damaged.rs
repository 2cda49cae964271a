//! Damaged traces: every libipt trace with bytes flipped and cut short must
//! list and walk to the end with errors where the damage is, never a panic.
//! (`fuzz/fuzz_targets/pt_trace.rs` explores further with cargo-fuzz.)

mod common;

use weft_pt::dump::{Options, TimeColumn};
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::pevent;
use weft_pt::sideband::{SampleFormat, Sideband};
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

/// A sideband file with a damaged record: the records before it are shown
/// and applied, the damaged one is an error naming its file and offset, the
/// channel reads no further, and the flow goes on with the code it has.
#[test]
fn a_damaged_sideband_record_is_an_error_at_its_offset() {
    let case = common::cases()
        .into_iter()
        .find(|case| case.dir() == "pevent-fork")
        .expect("the pevent-fork case");
    let (name, mut file) = case.sideband_files().remove(0);
    // The second MMAP (at 0x40) claims a size smaller than its header.
    file[0x46] = 4;
    let config = pevent::Config {
        sample_type: pevent::sample::TIME,
        time_mult: 1,
        ..pevent::Config::default()
    };
    let channel = pevent::Channel::new(&name, file, config, true);
    let sideband = Sideband::new(vec![channel], Box::new(|n| case.file(n)))
        .with_kernel_start(0xffff_ffff_8000_0000);
    let (trace, image) = (case.trace(), case.image());
    let format = SampleFormat {
        compact: true,
        offset: true,
        ..SampleFormat::default()
    };
    let mut lines = Vec::new();
    Flow::new(&trace, &image, weft_pt::Errata::default())
        .with_sideband(sideband)
        .run(&mut |step| {
            if step.shown_by_ptxed(format, false) {
                lines.push(step.ptxed(false).with_sideband(format).to_string());
            }
        });
    assert_eq!(
        lines[..2],
        [
            "0000000000000000  PERF_RECORD_MMAP  1/1, ffffffff80000000, 3, 0, pevent-fork.bin  { 0 }"
                .to_string(),
            format!("[{name}:0000000000000040 sideband error: decoder out of sync]"),
        ],
        "{lines:#?}"
    );
    // Without ITRACE_START no process's code is taken: the kernel address
    // the trace starts at is not in the flow's own image.
    assert!(
        lines[2].contains("error: no memory mapped at this address"),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("ITRACE_START")),
        "{lines:#?}"
    );
}

/// Every sideband file of the corpus with bytes flipped: the flow walks to
/// the end, never a panic.
#[test]
fn flipped_sideband_decodes_without_panics() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut runs = 0;
    for case in common::cases()
        .into_iter()
        .filter(common::Case::has_sideband)
    {
        let (trace, image) = (case.trace(), case.image());
        for _ in 0..50 {
            let channels = case
                .sideband_files()
                .into_iter()
                .enumerate()
                .map(|(i, (name, mut file))| {
                    for _ in 0..3 {
                        let at = (rng.next() % file.len() as u64) as usize;
                        file[at] ^= 1 << (rng.next() % 8);
                    }
                    let config = pevent::Config {
                        sample_type: rng.next() & 0x102c6,
                        time_mult: u32::try_from(rng.next() % 3).unwrap(),
                        ..pevent::Config::default()
                    };
                    pevent::Channel::new(&name, file, config, i == 0)
                })
                .collect();
            let sideband = Sideband::new(channels, Box::new(|n| case.file(n)))
                .with_kernel_start(0xffff_ffff_8000_0000);
            Flow::new(&trace, &image, weft_pt::Errata::default())
                .with_sideband(sideband)
                .with_ticks(true)
                .run(&mut |_| {});
            runs += 1;
        }
    }
    assert!(runs >= 500, "only {runs} runs");
}
