//! PT traces come from other machines and may be torn or hostile: listing
//! their packets and walking their flow (over code that is the same bytes)
//! must end with output or errors, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_pt::Errata;
use weft_pt::flow::Flow;
use weft_pt::image::Image;

fuzz_target!(|data: &[u8]| {
    let _ = weft_pt::dump::dump(data, weft_pt::dump::Options::default(), &mut std::io::sink());
    let mut image = Image::new();
    image.add(0x1000, data.to_vec());
    Flow::new(data, &image, Errata::default()).run(&mut |_| {});
});
