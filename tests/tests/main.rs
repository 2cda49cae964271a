//! weft's integration tests, one binary, one module per area.

// `weft stat` on the running kernel: exact counts, loss accounting, latency, filters.
mod stat;
// Bad input and missing privileges: one-line errors, non-zero exits.
mod errors;
