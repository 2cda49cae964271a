//! weft's kernel-side programs for the event sources. One module per probe
//! family, named as in `weft-abi`; `weft trace`'s programs build into an
//! object of their own (`oneliner_main.rs`).
#![no_std]
#![no_main]
// The BPF target's `core` has no atomic read-modify-write types; the
// intrinsic compiles to BPF's atomic add.
#![feature(core_intrinsics)]
#![allow(internal_features, reason = "see core_intrinsics above")]

mod args;
mod block;
mod conns;
mod counters;
mod events;
mod floor;
mod net;
mod pagecache;
mod sched;
mod stacks;
mod switch;
mod syscall;
mod task_storage;
mod tracepoint;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that can reach a loop like this, so a
    // panic path that survives optimisation fails loudly at load time.
    loop {}
}
