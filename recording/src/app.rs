//! Application records: programs push their own records (a request id and
//! its latency, say) through a Unix socket, `/run/weft/app.sock`, with the
//! `weft-client` crate or any writer of its text protocol (see that crate).
//! Each declared source becomes a store source like weft's own.
//!
//! Every connection is read by its own thread, which checks each line and
//! hands good ones to the recorder through a bounded channel: a client
//! faster than the store waits (back-pressure) rather than losing records.
//! A bad line gets `error LINE: why` and its connection is closed; the other
//! clients and the capture go on.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::{UnixListener, UnixStream},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, sync_channel},
    },
};

use anyhow::{Context as _, Result, bail};

use crate::{
    registry::{ValueKind, is_weft_source},
    socket,
};

/// What `--sources`, `weft.json` and the report call application records.
pub const NAME: &str = "app";

/// Where the agent listens.
pub const SOCKET: &str = "/run/weft/app.sock";
/// Records waiting for the recorder, at most.
const BACKLOG: usize = 1 << 16;
/// Fields per source, at most.
const MAX_FIELDS: usize = 32;

/// A checked line, for the recorder.
#[derive(Debug)]
pub enum Message {
    /// A new source (sent once per name).
    Define {
        name: String,
        fields: Vec<(String, ValueKind)>,
    },
    /// A record of a defined source; `ts` is when the agent read it.
    Record {
        name: Arc<str>,
        ts: u64,
        values: Vec<i64>,
    },
}

/// The listening endpoint.
pub struct AppServer {
    messages: Receiver<Message>,
    rejected: Arc<AtomicU64>,
    /// Records handed on so far.
    received: u64,
    _socket: socket::Bound,
}

/// Received and rejected application records.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppLosses {
    pub received: u64,
    /// Lines rejected (each closing its connection).
    pub rejected: u64,
}

type Schemas = Arc<Mutex<HashMap<String, Vec<(String, ValueKind)>>>>;

impl AppServer {
    /// Listens on [`SOCKET`], 0600, or 0660 for group `group` too.
    pub fn listen(group: Option<&str>) -> Result<Self> {
        let gid = group.map(group_id).transpose()?;
        let Some((listener, bound)) = socket::bind(&PathBuf::from(SOCKET), gid)? else {
            bail!("another weft takes application records at {SOCKET}");
        };
        let (sender, messages) = sync_channel(BACKLOG);
        let rejected = Arc::new(AtomicU64::new(0));
        let schemas = Schemas::default();
        let counter = rejected.clone();
        std::thread::Builder::new()
            .name("weft-app".into())
            .spawn(move || accept(&listener, &sender, &schemas, &counter))
            .context("failed to start the application record thread")?;
        Ok(Self {
            messages,
            rejected,
            received: 0,
            _socket: bound,
        })
    }

    /// Hands every waiting message to `on_message`.
    pub fn drain(&mut self, mut on_message: impl FnMut(Message)) {
        for message in self.messages.try_iter() {
            self.received += u64::from(matches!(message, Message::Record { .. }));
            on_message(message);
        }
    }

    /// Records received and lines rejected so far.
    pub fn losses(&self) -> AppLosses {
        AppLosses {
            received: self.received,
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

fn group_id(name: &str) -> Result<u32> {
    let c_name = std::ffi::CString::new(name).context("--app-group: NUL in name")?;
    // SAFETY: a valid NUL-terminated string; the result is read at once.
    let group = unsafe { libc::getgrnam(c_name.as_ptr()) };
    if group.is_null() {
        bail!("--app-group {name}: no such group");
    }
    // SAFETY: non-null pointer to a static struct group.
    Ok(unsafe { (*group).gr_gid })
}

fn accept(
    listener: &UnixListener,
    sender: &SyncSender<Message>,
    schemas: &Schemas,
    rejected: &Arc<AtomicU64>,
) {
    for stream in listener.incoming().flatten() {
        let (sender, schemas, rejected) = (sender.clone(), schemas.clone(), rejected.clone());
        let _ = std::thread::Builder::new()
            .name("weft-app-client".into())
            .spawn(move || serve(&stream, &sender, &schemas, &rejected));
    }
}

/// Reads one client's lines until it closes or a line is rejected: that
/// is counted, then the client is told why (so whoever reads the reply
/// also finds it counted).
fn serve(
    stream: &UnixStream,
    sender: &SyncSender<Message>,
    schemas: &Schemas,
    rejected: &AtomicU64,
) {
    let mut accepted = 0u64;
    let mut out = stream;
    let mut names: HashMap<String, (Arc<str>, usize)> = HashMap::new();
    for (number, line) in BufReader::new(stream).lines().enumerate() {
        let Ok(line) = line else { return };
        let reply = match line.split_once(' ').unwrap_or((line.as_str(), "")) {
            ("sync", "") => {
                if writeln!(out, "ok {accepted}").is_err() {
                    return; // the client left
                }
                Ok(())
            }
            ("source", rest) => define(rest, schemas, sender, &mut names),
            ("record", rest) => record(rest, &names, sender).map(|()| accepted += 1),
            (word, _) => Err(format!("unknown message `{word}` (source, record or sync)")),
        };
        if let Err(why) = reply {
            rejected.fetch_add(1, Ordering::Relaxed);
            let _ = writeln!(out, "error {}: {why}", number + 1);
            return;
        }
    }
}

fn define(
    rest: &str,
    schemas: &Schemas,
    sender: &SyncSender<Message>,
    names: &mut HashMap<String, (Arc<str>, usize)>,
) -> Result<(), String> {
    let mut words = rest.split(' ');
    let name = words.next().unwrap_or_default();
    check_name("source", name)?;
    if is_weft_source(name) {
        return Err(format!("`{name}` is one of weft's own sources"));
    }
    let fields = words
        .map(|word| {
            let (field, kind) = word.split_once(':').unwrap_or((word, "int"));
            check_name("field", field)?;
            let kind = ValueKind::parse(kind).ok_or_else(|| {
                format!("field {field}: kind `{kind}` is not int, duration or time")
            })?;
            Ok((field.to_owned(), kind))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if fields.is_empty() || fields.len() > MAX_FIELDS {
        return Err(format!("a source has 1 to {MAX_FIELDS} fields"));
    }
    let mut known = schemas.lock().map_err(|_| "internal error".to_owned())?;
    match known.get(name) {
        Some(existing) if *existing != fields => {
            return Err(format!("source {name} was declared with other fields"));
        }
        Some(_) => {}
        None => {
            known.insert(name.to_owned(), fields.clone());
            let message = Message::Define {
                name: name.to_owned(),
                fields: fields.clone(),
            };
            sender
                .send(message)
                .map_err(|_| "weft is stopping".to_owned())?;
        }
    }
    names.insert(name.to_owned(), (Arc::from(name), fields.len()));
    Ok(())
}

fn record(
    rest: &str,
    names: &HashMap<String, (Arc<str>, usize)>,
    sender: &SyncSender<Message>,
) -> Result<(), String> {
    let mut words = rest.split(' ');
    let name = words.next().unwrap_or_default();
    let Some((name, count)) = names.get(name) else {
        return Err(format!(
            "source `{name}` was not declared on this connection"
        ));
    };
    let values = words
        .map(|w| {
            w.parse::<i64>()
                .map_err(|_| format!("`{w}` is not an integer"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if values.len() != *count {
        return Err(format!(
            "{name} has {count} fields, this record {} values",
            values.len()
        ));
    }
    let message = Message::Record {
        name: name.clone(),
        ts: weft_store::now_ns(),
        values,
    };
    sender
        .send(message)
        .map_err(|_| "weft is stopping".to_owned())
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} name `{name}`: use 1 to 32 of a-z, 0-9 and _, starting with a letter"
        ))
    }
}
