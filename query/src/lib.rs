//! weft's query language: a small pipeline language for percentiles,
//! group-bys, series and time correlations over a capture, planned onto
//! the store's summary and index operators.
//!
//! Depends on `weft-store` only: no kernel, no eBPF, no terminal, no command
//! line.
//!
//! # Overview
//!
//! A query names a source, filters it, optionally correlates it with the
//! records of a sub-query, aggregates, and picks a time window:
//!
//! ```text
//! syscalls where name = "sendto" | p99.99(dur) last 60s
//! syscalls where name = "pread64" and dur > p99.99 last 60s
//! packets around (app | max(latency) last 60s) within 5s where dport = 5555
//! ```
//!
//! [`parse`] turns text into a [`Query`]; [`run`] answers it on a store
//! [`weft_store::Snapshot`], naming fields through a [`Catalog`] that the
//! capture's writer fills with meaning (durations, syscall names). The
//! language is described in `docs/query.md`.
//!
//! It is not: a general SQL engine. Joins are by time and by equal fields
//! only, and everything it computes is exact.
#![deny(missing_docs)]

pub mod aggregate;
pub mod answer;
pub mod ast;
pub mod bind;
pub mod catalog;
mod correlate;
mod engine;
pub mod error;
mod exec;
mod explain;
pub mod feed;
pub mod fleet;
pub mod health;
pub mod lex;
pub mod parse;
mod picks;
mod plan;
mod scan;
mod shape;
mod summarize;

pub use answer::{Answer, Cell, Header};
pub use ast::Query;
pub use catalog::{Addresses, Catalog, Column, Ids, Kind, Names, SourceColumns};
pub use error::{Error, Result, Span};
pub use parse::parse;

/// Parses `text` and answers it on `snapshot`.
pub fn run(snapshot: &weft_store::Snapshot, catalog: &Catalog, text: &str) -> Result<Answer> {
    answer(snapshot, catalog, &parse(text)?)
}

/// Answers a parsed query on `snapshot`.
pub fn answer(snapshot: &weft_store::Snapshot, catalog: &Catalog, query: &Query) -> Result<Answer> {
    exec::run(snapshot, catalog, query)
}

/// Parses `text` and calls `visit` with the cells of each record it
/// selects, holding none of them (for exports). The query may use `fields`
/// but not aggregate, sort or limit. Returns the columns (no rows), the
/// plan and the store's work.
pub fn stream(
    snapshot: &weft_store::Snapshot,
    catalog: &Catalog,
    text: &str,
    visit: &mut dyn FnMut(&[Header], Vec<Cell>),
) -> Result<Answer> {
    exec::stream(snapshot, catalog, &parse(text)?, visit)
}
