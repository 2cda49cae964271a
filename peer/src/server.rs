//! The peer port: a thread that answers signed POST requests with a
//! handler, bounded in every way a client could stretch it.

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;

use crate::{Error, SIGNATURE, Secret};

/// Connections served at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 16;

/// Handlers running at once: each may scan a capture, and the recorder's
/// own work comes first. Other signed requests wait for one to end.
pub const MAX_WORKING: usize = 2;

/// The largest request body taken.
pub const MAX_REQUEST: usize = 4 << 20;

/// How long a client has to send its request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one connection may last, its handler's work included.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(120);

/// How far a request's time may be from this host's clock; its nonce is
/// remembered that long.
pub const SKEW: Duration = Duration::from_secs(300);

/// Nonces remembered at most: requests past them within [`SKEW`] are
/// refused rather than letting an old nonce be forgotten early.
pub const MAX_NONCES: usize = 100_000;

/// Answers one request: its path and body to the reply's body, or a
/// refusal. Runs on a blocking thread: it may scan a capture.
pub type Handler = Arc<dyn Fn(&str, &[u8]) -> Result<Vec<u8>, Refusal> + Send + Sync>;

/// A handler's refusal: an HTTP status and what to tell the asker.
#[derive(Debug)]
pub struct Refusal {
    /// The HTTP status, e.g. 400 for a request that makes no sense.
    pub status: u16,
    /// The message.
    pub message: String,
}

struct Shared {
    secret: Arc<Secret>,
    handler: Handler,
    /// Nonces taken, with the request time each came with (ms).
    nonces: Mutex<HashMap<String, u64>>,
    working: Semaphore,
}

/// Listens on `addr` and answers signed requests with `handler` from a
/// thread of its own; returns the address bound. Binding is an error
/// (the user asked for the port); a refused request is the asker's.
pub fn serve(addr: SocketAddr, secret: Arc<Secret>, handler: Handler) -> Result<SocketAddr, Error> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Error::Http(format!("--peer-listen: failed to listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Http(e.to_string()))?;
    let shared = Arc::new(Shared {
        secret,
        handler,
        nonces: Mutex::new(HashMap::new()),
        working: Semaphore::new(MAX_WORKING),
    });
    std::thread::Builder::new()
        .name("weft-peer".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .expect("a current-thread runtime builds");
            runtime.block_on(accept(listener, shared));
        })
        .map_err(|e| Error::Http(format!("failed to start the peer thread: {e}")))?;
    Ok(bound)
}

async fn accept(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(Arc::clone(&shared), request));
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}

/// One request, checked and answered; every reply that can be is signed.
async fn answer(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (head, body) = request.into_parts();
    let signature = head
        .headers
        .get(SIGNATURE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut fields = signature.splitn(3, '.');
    let (time, nonce, mac) = (
        fields.next().unwrap_or_default(),
        fields.next().unwrap_or_default(),
        fields.next().unwrap_or_default(),
    );
    let body = match Limited::new(body, MAX_REQUEST).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Ok(reply(
                &shared.secret,
                None,
                413,
                format!("requests are at most {MAX_REQUEST} bytes").into(),
            ));
        }
    };
    let path = head.uri.path().to_string();
    let signed: [&[u8]; 6] = [
        b"request",
        head.method.as_str().as_bytes(),
        path.as_bytes(),
        time.as_bytes(),
        nonce.as_bytes(),
        &body,
    ];
    if !shared.secret.verify(&signed, mac) {
        return Ok(reply(
            &shared.secret,
            None,
            401,
            "not signed with this host's peer secret".into(),
        ));
    }
    if let Err(why) = take_nonce(&shared, time, nonce) {
        return Ok(reply(&shared.secret, Some(nonce), 401, why.into()));
    }
    if head.method != hyper::Method::POST {
        return Ok(reply(&shared.secret, Some(nonce), 405, "POST only".into()));
    }
    let Ok(_working) = shared.working.acquire().await else {
        return Ok(reply(
            &shared.secret,
            Some(nonce),
            503,
            "shutting down".into(),
        ));
    };
    let handler = Arc::clone(&shared.handler);
    let done = tokio::task::spawn_blocking(move || handler(&path, &body)).await;
    Ok(match done {
        Ok(Ok(bytes)) => reply(&shared.secret, Some(nonce), 200, bytes),
        Ok(Err(refusal)) => reply(
            &shared.secret,
            Some(nonce),
            refusal.status,
            refusal.message.into(),
        ),
        Err(_) => reply(
            &shared.secret,
            Some(nonce),
            500,
            "the handler failed".into(),
        ),
    })
}

/// Takes `nonce` sent at `time` (ms since the epoch) once: a request far
/// from this host's clock, or one seen before, is refused.
fn take_nonce(shared: &Shared, time: &str, nonce: &str) -> Result<(), &'static str> {
    let now = now_ms();
    let sent: u64 = time.parse().map_err(|_| "a request without its time")?;
    let skew = SKEW.as_millis() as u64;
    if sent.abs_diff(now) > skew {
        return Err(
            "a request whose time is more than 5 minutes from this host's clock (replayed, or the clocks differ)",
        );
    }
    if nonce.len() < 16 {
        return Err("a request without a nonce");
    }
    let mut nonces = shared.nonces.lock().unwrap_or_else(PoisonError::into_inner);
    if nonces.len() >= MAX_NONCES {
        nonces.retain(|_, at| at.abs_diff(now) <= skew);
    }
    if nonces.len() >= MAX_NONCES {
        return Err("too many requests in the last 5 minutes");
    }
    if nonces.insert(nonce.to_string(), sent).is_some() {
        return Err("a request seen before (replayed)");
    }
    Ok(())
}

/// A reply, signed over the request's nonce when there is one to sign
/// over (a request that is not signed gets an unsigned refusal).
fn reply(
    secret: &Secret,
    nonce: Option<&str>,
    status: u16,
    body: Vec<u8>,
) -> Response<Full<Bytes>> {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if let Some(nonce) = nonce {
        let signature = secret.sign(&[
            b"reply",
            nonce.as_bytes(),
            status.to_string().as_bytes(),
            &body,
        ]);
        response = response.header(SIGNATURE, signature);
    }
    response
        .body(Full::new(Bytes::from(body)))
        .expect("a status and one header make a response")
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
