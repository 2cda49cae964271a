//! Live queries: `weft record` answers queries on the capture it is writing
//! through a Unix socket, `/run/weft/query.sock`, in a directory only root
//! may enter (the socket itself is 0600). The protocol is one JSON line each
//! way and then the answer's text:
//!
//! ```text
//! client: {"query": "syscalls | count last 10s", "format": "table", "full_scan": false}
//! server: {"ok": true}            or   {"error": "message with caret"}
//!         <the answer, until the server closes the connection>
//! ```
//!
//! `weft trigger` asks for a manual trigger the same way:
//! `{"trigger": true, "note": "TEXT", "dir": "DIR or null"}`; `weft pt
//! import` has a PT capture's calls decoded and stored:
//! `{"pt_capture": "DIR"}`, answered `{"ok": true, "calls": N, "late": N,
//! "errors": N}` once they are stored.

use std::{
    io::Write as _,
    os::unix::net::UnixStream,
    path::Path,
    sync::{
        Arc,
        mpsc::{Sender, SyncSender},
    },
    time::Duration,
};

use crate::error::{Context as _, Result};
use serde_json::{Value, json};
use weft_store::Reader;

pub mod client;

use client::SOCKET;

use crate::socket::{self, Slots};
use weft_capture::{
    answer::{AnswerFormat, answer},
    open::Capture,
    pt_calls,
};

/// Decodes the Intel PT capture in a directory into its calls. The binary
/// supplies it: decoding is Intel PT's crates, which recording does not
/// depend on.
pub type DecodePt = fn(&Path) -> Result<pt_calls::Decoded>;

/// Serves live queries on the capture in `dir` from a background thread,
/// or says why not (another recorder serves them already) and returns
/// `None`: recording matters more than answering.
pub fn serve(
    reader: Reader,
    dir: &Path,
    triggers: SyncSender<String>,
    calls: Sender<pt_calls::Decoded>,
    decode: Option<DecodePt>,
) -> Result<Option<socket::Bound>> {
    let Some((listener, bound)) = socket::bind(Path::new(SOCKET), None)? else {
        log::warn!("weft: another weft serves live queries at {SOCKET}; this one will not");
        return Ok(None);
    };
    let served = Arc::new(Served {
        reader,
        capture: Capture::open(dir)?,
        triggers,
        calls,
        decode,
    });
    let slots = Slots::new(MAX_CLIENTS);
    std::thread::Builder::new()
        .name("weft-live".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let Some(slot) = slots.take() else {
                    let _ = writeln!(
                        &mut &stream,
                        "{}",
                        json!({ "error": "weft is answering too many clients; try again" })
                    );
                    continue;
                };
                let served = Arc::clone(&served);
                // One bad client must not stop the others, nor wait for them.
                let _ = std::thread::Builder::new()
                    .name("weft-live-client".into())
                    .spawn(move || {
                        let _ = handle(&stream, &served);
                        drop(slot);
                    });
            }
        })
        .context("failed to start the live query thread")?;
    Ok(Some(bound))
}

/// Clients answered at once.
const MAX_CLIENTS: usize = 8;

/// The longest request line (a query, a note, a path).
const MAX_REQUEST: usize = 64 << 10;

/// How long a client has to send its request, and to take each write of
/// the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the clients' threads share.
struct Served {
    reader: Reader,
    capture: Capture,
    triggers: SyncSender<String>,
    calls: Sender<pt_calls::Decoded>,
    decode: Option<DecodePt>,
}

fn handle(stream: &UnixStream, served: &Served) -> Result<()> {
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let Some(line) = socket::request_line(stream, MAX_REQUEST, CLIENT_TIMEOUT)? else {
        writeln!(
            &mut &*stream,
            "{}",
            json!({ "error": "the request is too long" })
        )?;
        return Ok(());
    };
    let request: Value = serde_json::from_str(&line)?;
    let dir = served.capture.dir();
    if request["trigger"] == true {
        return answer_trigger(stream, &request, dir, &served.triggers);
    }
    if let Some(capture) = request["pt_capture"].as_str() {
        let reply = store_capture(Path::new(capture), &served.calls, served.decode);
        let reply = reply.unwrap_or_else(|error| json!({ "error": format!("{error:#}") }));
        writeln!(&mut &*stream, "{reply}")?;
        return Ok(());
    }
    let text = request["query"].as_str().unwrap_or_default();
    let format = request["format"]
        .as_str()
        .and_then(AnswerFormat::from_name)
        .unwrap_or(AnswerFormat::Table);
    let full_scan = request["full_scan"].as_bool().unwrap_or(false);
    let snapshot = served.reader.snapshot();
    let now = weft_store::now_ns();
    let mut out = stream;
    match answer(
        &served.capture,
        &snapshot,
        text,
        format,
        Some(now),
        full_scan,
    ) {
        Ok(answer) => {
            writeln!(out, "{}", json!({ "ok": true }))?;
            out.write_all(answer.as_bytes())?;
        }
        Err(error) => writeln!(out, "{}", json!({ "error": format!("{error:#}") }))?,
    }
    Ok(())
}

/// A manual trigger for the recorder, if it records the directory asked.
fn answer_trigger(
    mut out: &UnixStream,
    request: &Value,
    dir: &Path,
    triggers: &SyncSender<String>,
) -> Result<()> {
    let asked = request["dir"].as_str().map(Path::new);
    let reply = match asked {
        Some(asked) if !same_file(asked, dir) => {
            json!({ "error": format!("this weft records {}, not {}", dir.display(), asked.display()) })
        }
        _ => match triggers.try_send(request["note"].as_str().unwrap_or_default().to_owned()) {
            Ok(()) => json!({ "ok": true }),
            Err(_) => json!({ "error": "the recorder has manual triggers waiting; try again" }),
        },
    };
    writeln!(out, "{reply}")?;
    Ok(())
}

/// Decodes a PT capture and has the recorder store its calls.
fn store_capture(
    capture: &Path,
    calls: &Sender<pt_calls::Decoded>,
    decode: Option<DecodePt>,
) -> Result<Value> {
    let decode = decode.context("this weft decodes no Intel PT captures")?;
    let (done, stored) = std::sync::mpsc::channel();
    let decoded = pt_calls::Decoded {
        done: Some(done),
        ..decode(capture)?
    };
    let errors = decoded.errors;
    calls
        .send(decoded)
        .ok()
        .context("the recorder has stopped")?;
    // The recorder stores them at its next tick, a second at most.
    let stored = stored
        .recv_timeout(Duration::from_secs(10))
        .ok()
        .context("the recorder did not store the calls")?;
    Ok(json!({ "ok": true, "calls": stored.stored, "late": stored.late, "errors": errors }))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
