//! The one-liners' kernel side: the attach points, fields and functions
//! the running kernel offers their checker ([`kernel`], [`btf`]), and the
//! generic programs that run a checked program ([`probe`], [`stacks`],
//! [`aggs`]), the files uprobes and USDT probes name (`files`), and kernel
//! memory for `*address` ([`kcore`]).

pub mod aggs;
pub mod btf;
pub mod dwarf;
mod files;
pub mod kcore;
pub mod kernel;
mod module_fentry;
pub mod probe;
pub mod stacks;
mod usdt;
