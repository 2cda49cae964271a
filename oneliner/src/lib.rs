//! weft's one-liner language: the everyday part of bpftrace's, so that the
//! classic one-liners run as written, plus `percentiles()`.
//!
//! Depends on `weft-abi` only: it must not load eBPF or know the store.
//!
//! [`parse`] turns text into a program, [`check`] resolves it against the
//! running kernel (through [`Kernel`]) into a [`Plan`] that says what the
//! kernel must copy per probe, [`lower`] turns the plan into the kernel
//! programs' configuration, and [`Runtime`] runs the actions on decoded
//! events and prints maps in bpftrace's layout. Nothing here touches eBPF:
//! `weft-kernel` loads the generic programs and `weft-recording`'s
//! `oneliner` feeds the events.

#![allow(
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "the language's integers are 64-bit words, reinterpreted between signed and unsigned as BPF does"
)]

pub mod ast;
mod cgroups;
pub mod check;
mod constants;
pub mod error;
mod expand;
pub mod format;
pub mod json;
pub mod kernel;
mod kernel_agg;
pub mod lex;
pub mod limits;
pub mod lower;
mod members;
pub mod output;
mod params;
pub mod parse;
pub mod plan;
mod preprocess;
mod push_down;
mod registers;
pub mod run;
mod saved;
mod sign;
mod signal;
pub mod stack;
mod starts;
mod types;
mod uprobe_args;
mod usdt;
pub mod value;

pub use check::{Attach, Plan, Target, check};
pub use error::{Error, Span};
pub use kernel::{Field, FieldKind, Kernel};
pub use output::Format;
pub use parse::parse;
pub use run::{Event, Flow, KernelAggs, KernelMemory, Names, Runtime};
pub use stack::{Frame, Stack, StackMode};
pub use uprobe_args::UserFunction;
pub use value::{Type, Value};
