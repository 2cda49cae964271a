//! The one-liners' kernel side: the attach points, fields and functions
//! the running kernel offers their checker ([`kernel`], [`btf`]), and the
//! generic programs that run a checked program ([`probe`], [`stacks`],
//! [`aggs`]).

pub mod aggs;
pub mod btf;
pub mod kernel;
pub mod probe;
pub mod stacks;
