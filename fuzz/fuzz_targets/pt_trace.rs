//! PT traces come from other machines and may be torn or hostile: listing
//! their packets and walking their flow (over code that is the same bytes)
//! must end with output or errors, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_pt::Errata;
use weft_pt::flow::Flow;
use weft_pt::image::Image;

fuzz_target!(|data: &[u8]| {
    // Times too, with clocks that make every timing packet count; the
    // first byte picks the MTC period so all of them get exercised.
    let options = weft_pt::dump::Options {
        time: Some(weft_pt::dump::TimeColumn::default()),
        clocks: weft_pt::time::Clocks {
            mtc_freq: data.first().map_or(0, |b| b & 0xf),
            ctc_eax: 3,
            ctc_ebx: 200,
            nom_freq: 30,
            ..weft_pt::time::Clocks::default()
        },
        errata: Errata {
            skl168: true,
            ..Errata::default()
        },
        ..weft_pt::dump::Options::default()
    };
    let _ = weft_pt::dump::dump(data, options, &mut std::io::sink());
    let mut image = Image::new();
    image.add(0x1000, data.to_vec());
    Flow::new(data, &image, Errata::default()).run(&mut |_| {});
});
