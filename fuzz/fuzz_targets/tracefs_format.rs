//! tracefs `format` files come from the kernel, but weft must not panic on any
//! text: parse arbitrary bytes and look up a few field names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_abi::tracefs::find_field;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for name in ["__syscall_nr", "ret", "comm", ""] {
        if let Some(field) = find_field(&text, name) {
            assert!(text.contains(&format!("offset:{}", field.offset)));
        }
    }
});
