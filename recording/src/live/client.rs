//! The client side of the live socket (see the parent module for its
//! protocol): `weft query --live`, `weft trigger` and `weft pt import` ask
//! the running recorder.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    os::unix::net::UnixStream,
    path::Path,
};

use crate::error::{Context as _, Result, bail};
use serde_json::{Value, json};

use weft_capture::answer::AnswerFormat;

/// Where the recorder listens.
pub const SOCKET: &str = "/run/weft/query.sock";

/// Has the running recorder decode and store the calls of the PT capture
/// in `capture`; says what it stored.
pub fn import(capture: &Path) -> Result<String> {
    let capture = capture
        .canonicalize()
        .with_context(|| format!("no capture at {}", capture.display()))?;
    let (reply, _) = send("store calls", &json!({ "pt_capture": capture }))?;
    Ok(format!(
        "{} calls of {} stored ({} too late, {} decoding error(s))",
        reply["calls"],
        capture.display(),
        reply["late"],
        reply["errors"]
    ))
}

/// Asks the running recorder (of `dir`, when given) for a manual trigger.
pub fn trigger(dir: Option<&Path>, note: &str) -> Result<()> {
    let dir = dir
        .map(|d| {
            d.canonicalize()
                .with_context(|| format!("no capture at {}", d.display()))
        })
        .transpose()?;
    send(
        "trigger",
        &json!({ "trigger": true, "note": note, "dir": dir }),
    )?;
    Ok(())
}

/// Sends `query` to the running recorder and returns its answer.
pub fn ask(query: &str, format: AnswerFormat, full_scan: bool) -> Result<String> {
    let request = json!({ "query": query, "format": format.name(), "full_scan": full_scan });
    let mut answer = String::new();
    send("ask", &request)?.1.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Sends one request line to the running recorder and reads its status
/// line; returns it and the rest of the reply. `what` names the request in
/// the error when no recorder listens.
fn send(what: &str, request: &Value) -> Result<(Value, BufReader<UnixStream>)> {
    let mut stream = UnixStream::connect(SOCKET).with_context(|| {
        format!("no live weft to {what} at {SOCKET} (start `weft record`; the socket needs root)")
    })?;
    writeln!(stream, "{request}")?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let status: Value = serde_json::from_str(&status).context("the live weft answered garbage")?;
    if let Some(error) = status["error"].as_str() {
        bail!("{error}");
    }
    Ok((status, reader))
}
