//! `weft record --peer-listen ADDR`: the recording's peer port, where
//! other hosts' weft (signed with the shared secret, see `weft-peer`) ask
//! fleet queries of the capture being written (`weft query --fleet`).

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::{Context as _, Result};
use weft_peer::{Handler, Refusal, Secret, client::FLEET_QUERY};
use weft_store::Reader;

/// Where the peer port listens, and the file of the fleet's secret.
#[derive(Clone, Debug)]
pub struct PeerPlan {
    pub listen: SocketAddr,
    pub secret: PathBuf,
}

/// Serves the peer port on the capture `reader` reads in `dir`; returns
/// the address bound.
pub fn serve(plan: &PeerPlan, reader: Reader, dir: PathBuf) -> Result<SocketAddr> {
    let secret = Secret::read(&plan.secret).context("--peer-secret")?;
    let handler: Handler = Arc::new(move |path: &str, body: &[u8]| match path {
        FLEET_QUERY => {
            let snapshot = reader.snapshot();
            weft_capture::fleet::serve_request(&snapshot, &dir, body, weft_store::now_ns()).map_err(
                |message| Refusal {
                    status: 400,
                    message,
                },
            )
        }
        other => Err(Refusal {
            status: 404,
            message: format!("this recorder answers {FLEET_QUERY}, not {other}"),
        }),
    });
    let bound = weft_peer::serve(plan.listen, secret, handler)?;
    eprintln!(
        "weft: peer port on {bound} (requests signed with {})",
        plan.secret.display()
    );
    Ok(bound)
}
