//! Reading classic tracepoint records at offsets user space found in
//! tracefs `format` files (Rust eBPF has no CO-RE).

use aya_ebpf::programs::TracePointContext;

/// The field at the offset in the loader-written global `offset`; `None`
/// when the read fails or the global is `u32::MAX` (a field this kernel's
/// tracepoint lacks).
#[inline(always)]
pub fn field<T: Copy>(ctx: &TracePointContext, offset: &'static u32) -> Option<T> {
    // SAFETY: read_volatile of a global, so the compiler cannot fold in
    // the default the loader replaces.
    let offset = unsafe { core::ptr::read_volatile(offset) };
    if offset == u32::MAX {
        return None;
    }
    // SAFETY: read_at goes through bpf_probe_read, which checks bounds.
    unsafe { ctx.read_at::<T>(offset as usize) }.ok()
}
