//! Asking a peer: one signed POST, its reply's signature checked, with
//! bounded time and size; and a peer as one host of a fleet query.

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{Request, body::Bytes, client::conn::http1};
use hyper_util::rt::TokioIo;
use weft_query::fleet::{
    Host,
    wire::{Reply, Request as FleetRequest},
};

use crate::{Error, SIGNATURE, Secret, secret::nonce, server::now_ms};

/// The largest reply taken.
pub const MAX_REPLY: usize = 64 << 20;

/// How long a peer has to accept the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a peer has to answer: a fleet query scans its window.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// The path fleet queries are asked on.
pub const FLEET_QUERY: &str = "/fleet/query";

/// A recorder at a peer address.
pub struct Peer {
    addr: String,
    secret: Arc<Secret>,
    runtime: tokio::runtime::Runtime,
}

impl Peer {
    /// A peer at `addr` (`HOST:PORT`), asked with `secret`.
    pub fn new(addr: &str, secret: Arc<Secret>) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::Http(e.to_string()))?;
        Ok(Self {
            addr: addr.to_string(),
            secret,
            runtime,
        })
    }

    /// The peer's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// POSTs `body` to `path` and returns the reply's body, once its
    /// signature checks.
    pub fn post(&self, path: &str, body: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.runtime.block_on(async {
            tokio::time::timeout(REPLY_TIMEOUT, self.exchange(path, body))
                .await
                .map_err(|_| {
                    Error::Http(format!("no answer within {} s", REPLY_TIMEOUT.as_secs()))
                })?
        })
    }

    async fn exchange(&self, path: &str, body: Vec<u8>) -> Result<Vec<u8>, Error> {
        let http = |e: &dyn std::fmt::Display| Error::Http(e.to_string());
        let stream =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&self.addr))
                .await
                .map_err(|_| {
                    Error::Http(format!(
                        "no connection within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    ))
                })?
                .map_err(|e| http(&e))?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(&e))?;
        tokio::spawn(connection);
        let (time, nonce) = (now_ms().to_string(), nonce()?);
        let signature = self.secret.sign(&[
            b"request",
            b"POST",
            path.as_bytes(),
            time.as_bytes(),
            nonce.as_bytes(),
            &body,
        ]);
        let request = Request::post(path)
            .header(hyper::header::HOST, &self.addr)
            .header(SIGNATURE, format!("{time}.{nonce}.{signature}"))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| http(&e))?;
        let response = sender.send_request(request).await.map_err(|e| http(&e))?;
        let status = response.status().as_u16();
        let signature = response
            .headers()
            .get(SIGNATURE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = Limited::new(response.into_body(), MAX_REPLY)
            .collect()
            .await
            .map_err(|e| Error::Http(format!("its reply: {e} (at most {MAX_REPLY} bytes)")))?
            .to_bytes()
            .to_vec();
        let code = status.to_string();
        let signed: [&[u8]; 4] = [b"reply", nonce.as_bytes(), code.as_bytes(), &body];
        let genuine = self.secret.verify(&signed, &signature);
        match (status, genuine) {
            (200, true) => Ok(body),
            (200, false) => Err(Error::Unsigned),
            (status, genuine) => Err(Error::Refused {
                status,
                message: format!(
                    "{}{}",
                    String::from_utf8_lossy(&body[..body.len().min(1024)]).trim_end(),
                    if genuine { "" } else { " (an unsigned reply)" }
                ),
            }),
        }
    }
}

impl Host for Peer {
    fn name(&self) -> &str {
        &self.addr
    }

    fn ask(&mut self, request: &FleetRequest) -> weft_query::Result<(Reply, u64)> {
        let failed = |message: String| weft_query::Error::Host {
            host: self.addr.clone(),
            message,
        };
        let body = serde_json::to_vec(request).map_err(|e| failed(e.to_string()))?;
        let bytes = self.post(FLEET_QUERY, body).map_err(|e| match e {
            // A query error comes back rendered, caret and all.
            Error::Refused {
                status: 400,
                message,
            } => failed(format!("\n{message}")),
            other => failed(other.to_string()),
        })?;
        let reply = serde_json::from_slice(&bytes)
            .map_err(|e| failed(format!("a reply that does not decode: {e}")))?;
        Ok((reply, bytes.len() as u64))
    }
}
