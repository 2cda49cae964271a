//! `weft record --peer-listen ADDR`: the recording's peer port, where
//! other hosts' weft (signed with the shared secret, see `weft-peer`) ask
//! fleet queries of the capture being written (`weft query --fleet`) and
//! ask it to keep a firing's window (`travel.rs`).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, mpsc},
    time::Duration,
};

use crate::error::{Context as _, Result};
use tokio::sync::Notify;
use weft_peer::{Handler, Refusal, Secret, client::FLEET_QUERY};
use weft_store::Reader;

use crate::travel::{Incoming, PIN, PinRequest, Routes};

/// Where the peer port listens, the file of the fleet's secret, and where
/// firings travel.
#[derive(Clone, Debug)]
pub struct PeerPlan {
    pub listen: SocketAddr,
    pub secret: PathBuf,
    /// Recorders named with `--peer`; others are found at a connection's
    /// remote address on this port.
    pub peers: Vec<SocketAddr>,
    /// How many hops a firing travels (`--peer-hops`).
    pub hops: u32,
}

impl PeerPlan {
    /// Where firings travel from here.
    pub fn routes(&self) -> Routes {
        Routes {
            peers: self.peers.clone(),
            port: Some(self.listen.port()),
            hops: self.hops,
        }
    }

    /// This recorder's name in firings: its address, or the host's name
    /// when it listens on every address.
    pub fn name(&self) -> String {
        if self.listen.ip().is_unspecified() {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}:{}", host.trim(), self.listen.port())
        } else {
            self.listen.to_string()
        }
    }
}

/// How the peer port hands peers' firings to the recorder: a queue and a
/// wakeup.
pub struct Pins {
    pub queue: mpsc::SyncSender<Incoming>,
    pub wake: Arc<Notify>,
}

/// What the recording shares with its peer port: the secret, and the
/// queue of peers' firings with the wakeup that goes with it.
pub struct Side {
    pub secret: Arc<Secret>,
    pub incoming: mpsc::Receiver<Incoming>,
    pub wake: Arc<Notify>,
    queue: mpsc::SyncSender<Incoming>,
}

/// Peers' firings waiting for the recorder at most.
const MAX_WAITING: usize = 64;

impl Side {
    /// Reads the secret of `plan`.
    pub fn open(plan: &PeerPlan) -> Result<Self> {
        let secret = Secret::read(&plan.secret).context("--peer-secret")?;
        let (queue, incoming) = mpsc::sync_channel(MAX_WAITING);
        Ok(Self {
            secret: Arc::new(secret),
            incoming,
            wake: Arc::default(),
            queue,
        })
    }

    /// Where the peer port hands firings.
    pub fn pins(&self) -> Pins {
        Pins {
            queue: self.queue.clone(),
            wake: Arc::clone(&self.wake),
        }
    }
}

/// How long a peer's request to keep a window waits for the recorder.
const PIN_WAIT: Duration = Duration::from_secs(2);

/// Serves the peer port on the capture `reader` reads in `dir`, handing
/// peers' firings to `pins`; returns the address bound.
pub fn serve(
    plan: &PeerPlan,
    secret: Arc<Secret>,
    reader: Reader,
    dir: &Path,
    pins: Pins,
) -> Result<SocketAddr> {
    let capture = weft_capture::open::Capture::open(dir)?;
    let handler: Handler = Arc::new(move |path: &str, body: &[u8]| match path {
        PIN => pin(&pins, body),
        FLEET_QUERY => {
            let snapshot = reader.snapshot();
            weft_capture::fleet::serve_request(&capture, &snapshot, body, weft_store::now_ns())
                .map_err(|message| Refusal {
                    status: 400,
                    message,
                })
        }
        other => Err(Refusal {
            status: 404,
            message: format!("this recorder answers {FLEET_QUERY}, not {other}"),
        }),
    });
    let bound = weft_peer::serve(plan.listen, secret, handler)?;
    log::info!("weft: firings travel up to {} hops from here", plan.hops);
    log::info!(
        "weft: peer port on {bound} (requests signed with {})",
        plan.secret.display()
    );
    Ok(bound)
}

/// A peer's firing, handed to the recorder; its answer once kept.
fn pin(pins: &Pins, body: &[u8]) -> Result<Vec<u8>, Refusal> {
    let refuse = |status: u16, message: String| Refusal { status, message };
    let request: PinRequest =
        serde_json::from_slice(body).map_err(|e| refuse(400, format!("not a firing: {e}")))?;
    let (answer, answered) = mpsc::sync_channel(1);
    pins.queue
        .try_send((request, answer))
        .map_err(|_| refuse(503, "too many firings waiting here".into()))?;
    pins.wake.notify_one();
    let reply = answered
        .recv_timeout(PIN_WAIT)
        .map_err(|_| refuse(503, "the recorder did not answer in time".into()))?;
    Ok(serde_json::to_vec(&reply).expect("replies encode"))
}
