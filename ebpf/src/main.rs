//! weft's kernel-side programs. One module per probe family, named as in
//! `weft-probes`; this file only holds what every eBPF binary needs.
#![no_std]
#![no_main]

mod floor;
mod syscall;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that can reach a loop like this, so a
    // panic path that survives optimisation fails loudly at load time.
    loop {}
}
