//! Application records: programs push their own records (a request id and
//! its latency, say) through a Unix socket, `/run/weft/app.sock`, with the
//! `weft-client` crate or any writer of its text protocol
//! (`weft_client::protocol`, which defines it).
//! Each declared source becomes a store source like weft's own.
//!
//! Every connection is read by its own thread, which checks each line and
//! hands good ones to the recorder through a bounded channel: a connection
//! faster than the store waits (back-pressure). `weft-client` itself never
//! makes the application wait: it drops what its own queue cannot hold and
//! tells the agent how many (`dropped N`), which counts them as lost.
//! A bad line gets `error LINE: why` and its connection is closed; the other
//! clients and the capture go on.
//!
//! Against its own clients: at most [`MAX_CLIENTS`] connections, lines of
//! at most [`MAX_LINE`] bytes, [`MAX_SOURCES`] sources in all; a source's
//! field named `pid` holds the sending process's pid from the socket's
//! peer credentials (`SO_PEERCRED`), whatever the client wrote there, so
//! that triggers (`WEFT_TRIGGER_PID`, `--pt-on-trigger`) act on the real
//! sender.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    os::unix::net::{UnixListener, UnixStream},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, sync_channel},
    },
};

use crate::error::{Context as _, Result, bail};

use crate::socket::{self, Slots};
use weft_capture::registry::{ValueKind, is_weft_source};
use weft_client::protocol::{Answer, Request};

/// What `--sources`, `weft.json` and the report call application records.
pub const NAME: &str = "app";

/// Where the agent listens.
pub use weft_client::protocol::SOCKET;
/// Records waiting for the recorder, at most.
const BACKLOG: usize = 1 << 16;
/// Connections served at once; one past them is told so and closed.
pub const MAX_CLIENTS: usize = 64;
/// The longest line: a source of [`weft_client::protocol::MAX_FIELDS`] fields with long names,
/// or a record of as many 20-digit values, fits several times over.
pub const MAX_LINE: usize = 4096;
/// Sources the applications may define in all.
pub const MAX_SOURCES: usize = 64;
/// The field that holds the sender's pid.
const PID: &str = "pid";

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
    /// Records the clients dropped (their queue full) and told of.
    dropped: Arc<AtomicU64>,
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
    /// Records the clients dropped while weft lagged, as they told it
    /// (`dropped N`): lost before they reached weft.
    pub dropped: u64,
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
        let counts = Counts::default();
        let schemas = Schemas::default();
        let (rejected, dropped) = (counts.rejected.clone(), counts.dropped.clone());
        std::thread::Builder::new()
            .name("weft-app".into())
            .spawn(move || accept(&listener, &sender, &schemas, &counts))
            .context("failed to start the application record thread")?;
        Ok(Self {
            messages,
            rejected,
            dropped,
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
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// What the connections count for the report.
#[derive(Clone, Default)]
struct Counts {
    /// Lines rejected.
    rejected: Arc<AtomicU64>,
    /// Records the clients dropped.
    dropped: Arc<AtomicU64>,
}

fn group_id(name: &str) -> Result<u32> {
    let c_name = std::ffi::CString::new(name)
        .ok()
        .context("--app-group: NUL in name")?;
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
    counts: &Counts,
) {
    let slots = Slots::new(MAX_CLIENTS);
    for stream in listener.incoming().flatten() {
        let Some(slot) = slots.take() else {
            counts.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = writeln!(&mut &stream, "error 0: more than {MAX_CLIENTS} connections");
            continue;
        };
        let (sender, schemas, counts) = (sender.clone(), schemas.clone(), counts.clone());
        let _ = std::thread::Builder::new()
            .name("weft-app-client".into())
            .spawn(move || {
                serve(&stream, &sender, &schemas, &counts);
                drop(slot);
            });
    }
}

/// Reads one client's lines until it closes or a line is rejected: that
/// is counted, then the client is told why (so whoever reads the reply
/// also finds it counted).
fn serve(stream: &UnixStream, sender: &SyncSender<Message>, schemas: &Schemas, counts: &Counts) {
    let mut accepted = 0u64;
    let mut out = stream;
    let mut names: HashMap<String, Declared> = HashMap::new();
    let Some(pid) = peer_pid(stream) else { return };
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    for number in 0.. {
        buf.clear();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let ended = buf.last() == Some(&b'\n');
        let line = String::from_utf8_lossy(buf.strip_suffix(b"\n").unwrap_or(&buf));
        let request = if !ended && buf.len() > MAX_LINE {
            Err(format!("a line is at most {MAX_LINE} bytes"))
        } else {
            Request::parse(&line)
        };
        let reply = match request {
            Ok(Request::Sync) => {
                if writeln!(out, "{}", Answer::Accepted(accepted)).is_err() {
                    return; // the client left
                }
                Ok(())
            }
            Ok(Request::Source { name, fields }) => {
                define(name, &fields, schemas, sender, &mut names)
            }
            Ok(Request::Record { name, values }) => {
                record(name, values.into_owned(), &names, pid, sender).map(|()| accepted += 1)
            }
            Ok(Request::Dropped(n)) => {
                counts.dropped.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(why) => Err(why),
        };
        if let Err(why) = reply {
            counts.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = writeln!(out, "{}", Answer::rejected(number + 1, &why));
            return;
        }
    }
}

/// A source as one connection declared it: its name, the values a
/// record of it has (a field's, two a trace id's) and where its `pid`
/// value is.
struct Declared {
    name: Arc<str>,
    fields: usize,
    pid: Option<usize>,
}

/// The pid of the process at the other end of `stream` (`SO_PEERCRED`).
fn peer_pid(stream: &UnixStream) -> Option<i64> {
    use std::os::fd::AsRawFd as _;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::ucred>()).ok()?;
    // SAFETY: `cred` and `len` are valid for the kernel to write, and `len`
    // says how much room `cred` has.
    let done = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    (done == 0).then_some(i64::from(cred.pid))
}

/// A `source` line, whose name and fields the protocol checked: the name
/// must be no source of weft's own, nor declared before with other fields.
fn define(
    name: &str,
    fields: &[(&str, ValueKind)],
    schemas: &Schemas,
    sender: &SyncSender<Message>,
    names: &mut HashMap<String, Declared>,
) -> Result<(), String> {
    if is_weft_source(name) {
        return Err(format!("`{name}` is one of weft's own sources"));
    }
    let fields: Vec<(String, ValueKind)> = fields
        .iter()
        .map(|(field, kind)| ((*field).to_owned(), *kind))
        .collect();
    let mut known = schemas.lock().map_err(|_| "internal error".to_owned())?;
    match known.get(name) {
        Some(existing) if *existing != fields => {
            return Err(format!("source {name} was declared with other fields"));
        }
        Some(_) => {}
        None if known.len() >= MAX_SOURCES => {
            return Err(format!(
                "applications have defined {MAX_SOURCES} sources, the most weft takes"
            ));
        }
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
    // A record has a value per field, two for a trace id.
    let slots: Vec<usize> = (fields.iter())
        .scan(0, |at, (_, kind)| {
            let slot = *at;
            *at += kind.values();
            Some(slot)
        })
        .collect();
    let declared = Declared {
        name: Arc::from(name),
        fields: fields.iter().map(|(_, kind)| kind.values()).sum(),
        pid: (fields.iter().zip(&slots))
            .find(|((field, kind), _)| field == PID && kind.values() == 1)
            .map(|(_, slot)| *slot),
    };
    names.insert(name.to_owned(), declared);
    Ok(())
}

/// A `record` line of a source this connection declared; its `pid` field
/// becomes the sender's.
fn record(
    name: &str,
    mut values: Vec<i64>,
    names: &HashMap<String, Declared>,
    pid: i64,
    sender: &SyncSender<Message>,
) -> Result<(), String> {
    let Some(Declared {
        name,
        fields: count,
        pid: pid_field,
    }) = names.get(name)
    else {
        return Err(format!(
            "source `{name}` was not declared on this connection"
        ));
    };
    if values.len() != *count {
        return Err(format!(
            "{name} takes {count} values (one per field, two per trace_id), this record {}",
            values.len()
        ));
    }
    // The sender's pid is the kernel's word, not the client's.
    if let Some(at) = pid_field {
        values[*at] = pid;
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

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader, Write as _};

    use super::*;

    /// A client connected to a server thread; the server's messages.
    fn connect(schemas: &Schemas) -> (UnixStream, Receiver<Message>, Arc<AtomicU64>) {
        let (client, server) = UnixStream::pair().unwrap();
        let (sender, messages) = sync_channel(BACKLOG);
        let counts = Counts::default();
        let (schemas, rejected) = (schemas.clone(), counts.rejected.clone());
        std::thread::spawn(move || serve(&server, &sender, &schemas, &counts));
        (client, messages, rejected)
    }

    /// Sends `line` and reads the reply to a `sync` after it. The write may
    /// fail part way: a line past the bound is refused, and the connection
    /// closed, before all of it is sent; the reply says so.
    fn send(client: &UnixStream, line: &str) -> String {
        let _ = writeln!(&mut &*client, "{line}\nsync");
        let mut reply = String::new();
        BufReader::new(client).read_line(&mut reply).unwrap();
        reply
    }

    #[test]
    fn the_pid_field_is_the_senders_whatever_the_client_writes() {
        let schemas = Schemas::default();
        let (client, messages, _) = connect(&schemas);
        assert_eq!(send(&client, "source req pid latency:duration"), "ok 0\n");
        assert_eq!(send(&client, "record req 1 5"), "ok 1\n");
        let records: Vec<Vec<i64>> = (messages.try_iter())
            .filter_map(|m| match m {
                Message::Record { values, .. } => Some(values),
                Message::Define { .. } => None,
            })
            .collect();
        assert_eq!(records, [vec![i64::from(std::process::id()), 5]]);
    }

    #[test]
    fn a_long_line_a_doubled_field_and_one_source_too_many_are_refused() {
        let schemas = Schemas::default();
        let (client, _messages, rejected) = connect(&schemas);
        let long = format!("record {}", "1 ".repeat(MAX_LINE));
        assert!(send(&client, &long).contains(&format!("at most {MAX_LINE} bytes")));
        let (client, _messages, _) = connect(&schemas);
        assert!(send(&client, "source req a b a").contains("field a is declared twice"));
        let (client, _messages, _) = connect(&schemas);
        for i in 0..MAX_SOURCES {
            assert_eq!(send(&client, &format!("source s{i} v")), format!("ok 0\n"));
        }
        assert!(send(&client, "source one_more v").contains("the most weft takes"));
        assert_eq!(rejected.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn dropped_counts_add_up_and_a_bad_count_is_refused() {
        let (client, _messages) = {
            let (client, server) = UnixStream::pair().unwrap();
            let (sender, messages) = sync_channel(BACKLOG);
            let counts = Counts::default();
            let dropped = counts.dropped.clone();
            std::thread::spawn(move || serve(&server, &sender, &Schemas::default(), &counts));
            ((client, dropped), messages)
        };
        let (client, dropped) = client;
        assert_eq!(send(&client, "dropped 5\ndropped 7"), "ok 0\n");
        assert_eq!(dropped.load(Ordering::Relaxed), 12);
        assert_eq!(
            send(&client, "dropped many"),
            "error 4: `dropped` takes a count, not `many`\n"
        );
    }

    #[test]
    fn connections_past_the_bound_are_told_so_and_closed() {
        let dir = std::env::temp_dir().join(format!("weft-app-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("app.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let (sender, _messages) = sync_channel(BACKLOG);
        let (schemas, counts) = (Schemas::default(), Counts::default());
        std::thread::spawn(move || accept(&listener, &sender, &schemas, &counts));
        let held: Vec<UnixStream> = (0..MAX_CLIENTS)
            .map(|_| {
                let client = UnixStream::connect(&path).unwrap();
                assert_eq!(send(&client, "sync"), "ok 0\n");
                client
            })
            .collect();
        let extra = UnixStream::connect(&path).unwrap();
        let mut reply = String::new();
        BufReader::new(&extra).read_line(&mut reply).unwrap();
        assert_eq!(
            reply,
            format!("error 0: more than {MAX_CLIENTS} connections\n")
        );
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
