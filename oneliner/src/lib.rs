//! weft's one-liner language: the everyday part of bpftrace's, so that the
//! classic one-liners run as written, plus `percentiles()`.
//!
//! Depends on `weft-abi` only: it must not load eBPF or know the store.
//!
//! [`parse()`] turns text into a program, [`check()`] resolves it against
//! the running kernel (through [`Kernel`]) into a [`Plan`] that says what
//! the kernel must copy per probe, [`lower`] turns the plan into the kernel
//! programs' configuration, and [`Runtime`] runs the actions on decoded
//! events and prints maps in bpftrace's layout. Nothing here touches eBPF:
//! `weft-kernel` loads the generic programs and `weft-recording`'s
//! `oneliner` feeds the events.
//!
//! The files are grouped by those jobs: `syntax/` (the preprocessor,
//! lexer, parser, tree and parameters), `check/` (probes expanded, types,
//! what the kernel reads, pushed-down predicates, kernel aggregations and
//! starts, the plan and its lowering), `run/` (the runtime, output, formats,
//! JSON, stacks, signals, cgroup paths); errors, limits and values are
//! shared by all three.

#![allow(
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "the language's integers are 64-bit words, reinterpreted between signed and unsigned as BPF does"
)]

// The crate's files by job: `syntax/` (text to a program), `check/` (a
// program against the kernel to a plan, and the plan to the kernel's
// configuration), `run/` (events through the actions to printed maps). The
// modules keep their short paths (`crate::ast`, `weft_oneliner::kernel`).
pub mod check;
pub mod error;
pub mod limits;
pub mod run;
mod syntax;
pub mod value;

pub(crate) use check::{
    constants, expand, kernel_agg, members, push_down, registers, saved, sign, starts, types,
    uprobe_args, usdt,
};
pub use check::{kernel, lower, plan};
pub(crate) use run::{cgroups, signal};
pub use run::{format, json, output, stack};
pub use syntax::{ast, lex, parse};
pub(crate) use syntax::{params, preprocess};

pub use check::{Attach, Plan, Target, check};
pub use error::{Error, Span};
pub use kernel::{Field, FieldKind, Kernel};
pub use output::OutputFormat;
pub use parse::parse;
pub use run::{Event, Flow, KernelAggs, KernelMemory, Names, Packets, Runtime, Watch};
pub use stack::{Frame, Stack, StackMode};
pub use uprobe_args::UserFunction;
pub use value::{Type, Value};
