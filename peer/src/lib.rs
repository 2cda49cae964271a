//! The channel between weft recorders on different hosts: HTTP/1.1
//! (hyper) where every request and every reply is signed with a secret the
//! hosts share (HMAC-SHA256). A request carries its time and a fresh
//! nonce, and a server takes each nonce once within [`server::SKEW`] of
//! its own clock, so a recorded request cannot be replayed; a reply is
//! signed over the request's nonce, so it cannot be forged or swapped.
//! The channel authenticates but does not encrypt: what crosses is
//! aggregates, a few values and window times, never records, and a fleet
//! that wants them hidden runs the peer port on a private network.
//!
//! Must not depend on the kernel side (`weft-kernel`, aya), the recording
//! side or the command line: it moves signed bytes, and the one weft type
//! it knows is the fleet query's [`weft_query::fleet::Host`], which
//! [`client::Peer`] implements (`xtask/src/layers.rs` checks it).

pub mod client;
pub mod secret;
pub mod server;

pub use client::Peer;
pub use secret::Secret;
pub use server::{Handler, Refusal, serve};

/// The header a signature travels in.
pub const SIGNATURE: &str = "x-weft-signature";

/// What went wrong on the channel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The shared secret's file could not be used.
    #[error("the peer secret {path}: {why}")]
    Secret {
        /// The file.
        path: String,
        /// Why not.
        why: String,
    },
    /// The peer could not be reached, or the exchange broke off.
    #[error("{0}")]
    Http(String),
    /// The peer answered with an error.
    #[error("refused ({status}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The peer's message.
        message: String,
    },
    /// The reply is not signed with the shared secret.
    #[error(
        "its reply is not signed with the shared secret (a different --peer-secret, or not a weft peer port)"
    )]
    Unsigned,
}
