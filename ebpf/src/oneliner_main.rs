//! `weft trace`'s object: only the generic one-liner programs and their
//! maps, so that loading a one-liner creates nothing else.
#![no_std]
#![no_main]
// The BPF target's `core` has no atomic read-modify-write types; the
// intrinsic compiles to BPF's atomic add.
#![feature(core_intrinsics)]
#![allow(internal_features, reason = "see core_intrinsics above")]
// A context word loaded in place is one instruction the compiler must not
// merge with its siblings into a load at a variable offset, which the
// verifier refuses (`oneliner::word_in_place`).
#![feature(asm_experimental_arch)]

mod counters;
mod oneliner;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that can reach a loop like this.
    loop {}
}
