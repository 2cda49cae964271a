//! Capture files come from disk and may be torn, corrupt or hostile: opening
//! them read-only and querying must give answers or errors, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../store/tests/common/fuzz_input.rs");

fuzz_target!(|data: &[u8]| store_reader(data));
