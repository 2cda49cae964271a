//! x86-64 `struct pt_regs`, the context of kprobes, uprobes and USDT
//! probes: its registers by the names bpftrace's `reg()` takes.

/// The registers, in the struct's order (8 bytes each).
const REGISTERS: [&str; 21] = [
    "r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx", "dx", "si", "di",
    "orig_ax", "ip", "cs", "flags", "sp", "ss",
];

/// The offsets of the registers holding arguments 0 to 5 (`di`, `si`,
/// `dx`, `cx`, `r8`, `r9`, the System V calling convention).
pub(crate) const REGISTER_ARGS: [u16; 6] = [112, 104, 96, 88, 72, 64];

/// The offset of register `name` in the struct.
pub(crate) fn offset(name: &str) -> Option<u16> {
    let at = REGISTERS.iter().position(|r| *r == name)?;
    Some(at as u16 * 8)
}
