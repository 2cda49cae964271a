//! Triggers that travel (after Hindsight's breadcrumbs, found in the
//! kernel instead of carried by the application): when a trigger fires for
//! a thread, the recorders at the other ends of that thread's connections
//! (from the `conns` source) are asked to keep the same window, and they
//! ask along the connections of *their* threads that served the same
//! connection, a hop less each time. A firing's id ends loops (a host keeps
//! a window for an id once); each host applies its own rate limit and disk
//! budget to firings from peers as to its own.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, PoisonError, mpsc},
    time::Instant,
};

use serde::{Deserialize, Serialize};
use weft_abi::conns::ConnEvent;
use weft_capture::metadata::{Firing, PeerLog, Received, Sent};
use weft_peer::{Peer, Secret};

use crate::{
    hosts::{Conn, now_wall, wall},
    segments::{self, Offset, Seen, Segments},
};

/// The path peers ask to keep a window on.
pub const PIN: &str = "/fleet/pin";

/// Connections used per thread, kept for the horizon after their
/// last use and bounded in number.
pub struct Recent {
    /// Per thread: each connection and the first and last time it was
    /// noted (`CLOCK_MONOTONIC` ns).
    by_tid: HashMap<u32, Vec<(Conn, u64, u64)>>,
    /// How long a use is remembered: the longest window a firing keeps.
    horizon: u64,
    /// When the table was last pruned.
    pruned: u64,
}

/// Threads remembered at most; past it the table forgets what is oldest.
const MAX_THREADS: usize = 1 << 16;

/// Connections remembered per thread at most.
const MAX_PER_THREAD: usize = 64;

impl Recent {
    fn new(horizon: u64) -> Self {
        Self {
            by_tid: HashMap::new(),
            horizon,
            pruned: 0,
        }
    }

    /// Notes a `conns` record.
    pub fn note(&mut self, event: &ConnEvent) {
        if event.family != 4 || event.daddr == 0 {
            return;
        }
        let conn = Conn {
            local: (event.saddr, event.sport),
            remote: (event.daddr, event.dport),
        };
        let now = event.ts_ns;
        if now.saturating_sub(self.pruned) > self.horizon || self.by_tid.len() >= MAX_THREADS {
            self.prune(now);
        }
        let uses = self.by_tid.entry(event.tid).or_default();
        if let Some(used) = uses.iter_mut().find(|(c, _, _)| *c == conn) {
            used.2 = used.2.max(now);
        } else if uses.len() < MAX_PER_THREAD {
            uses.push((conn, now, now));
        } else if let Some(oldest) = uses.iter_mut().min_by_key(|(_, _, last)| *last) {
            // The use seen longest ago makes room.
            *oldest = (conn, now, now);
        }
    }

    fn prune(&mut self, now: u64) {
        let since = now.saturating_sub(self.horizon);
        self.by_tid.retain(|_, uses| {
            uses.retain(|(_, _, last)| *last >= since);
            !uses.is_empty()
        });
        if self.by_tid.len() >= MAX_THREADS {
            self.by_tid.clear();
        }
        self.pruned = now;
    }

    /// The connections `tid` used in `from..=to`.
    pub fn of_thread(&self, tid: u32, (from, to): (u64, u64)) -> Vec<Conn> {
        self.by_tid.get(&tid).map_or_else(Vec::new, |uses| {
            uses.iter()
                .filter(|(_, first, last)| *first <= to && *last >= from)
                .map(|(c, _, _)| *c)
                .collect()
        })
    }

    /// The threads that used `conn` in `from..=to`.
    pub fn threads_on(&self, conn: Conn, (from, to): (u64, u64)) -> Vec<u32> {
        self.by_tid
            .iter()
            .filter(|(_, uses)| {
                uses.iter()
                    .any(|(c, first, last)| *c == conn && *first <= to && *last >= from)
            })
            .map(|(tid, _)| *tid)
            .collect()
    }
}

/// What a host asks a peer: keep this window, and ask along.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PinRequest {
    /// The firing's id, the same on every host it reaches.
    pub id: String,
    /// The host whose trigger fired, and its condition.
    pub origin: String,
    pub condition: String,
    /// The host asking.
    pub from: String,
    /// How far along the chain this request is (1: asked by the origin).
    pub hop: u32,
    /// Hops the receiver may still ask along.
    pub hops_left: u32,
    /// When the trigger fired at the origin, wall-clock ns since the epoch.
    pub fired_wall: i64,
    /// The window, wall-clock ns since the epoch.
    pub start_wall: i64,
    pub end_wall: i64,
    /// The receiver's clock minus the asker's, as an earlier exchange
    /// between them measured it; `None` when none did.
    #[serde(default)]
    pub offset_ns: Option<i64>,
    /// The bound on that estimate's error ([`DEFAULT_CLOCK_ERROR`] when
    /// nothing was measured), ns: the receiver widens the window by it.
    pub error_ns: u64,
    /// The connection the asker's thread used, as the asker sees it.
    pub via: Conn,
    /// The asker's newest segments on `via`, for the receiver to bound the
    /// clocks' offset with its own (`segments.rs`).
    #[serde(default)]
    pub segments: Vec<Seen>,
    /// The asker's wall clock when it sent this, for the clock estimate.
    pub sent_wall: i64,
}

/// A peer's answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PinReply {
    /// Whether it keeps the window now (not: it had, or its limits refused).
    pub kept: bool,
    /// Why not, or what it did.
    pub note: String,
    /// Its wall clock when the request arrived and when it answered.
    pub received_wall: i64,
    pub replied_wall: i64,
    /// Its clock minus the asker's as the segments both saw bound it.
    #[serde(default)]
    pub segments_clock: Option<Offset>,
}

/// Where a peer's window lies on this host's clock: this host's clock
/// minus the asker's, the bound on its error, and what measured it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub offset_ns: i64,
    pub error_ns: u64,
    /// `segments` (both hosts' TC saw the same TCP segments), `exchange`
    /// (an earlier request's four times, NTP's way) or `unmeasured`.
    pub from: &'static str,
}

/// A request handed from the peer port to the recorder, with where to
/// send the answer.
pub type Incoming = (PinRequest, mpsc::SyncSender<PinReply>);

/// Where to find the recorders at the other ends of connections.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// Recorders named with `--peer`: a connection to one's address goes
    /// to it.
    pub peers: Vec<SocketAddr>,
    /// Otherwise the port every host listens on (this one's).
    pub port: Option<u16>,
    /// How many hops a firing travels.
    pub hops: u32,
}

impl Routes {
    /// The recorder at the remote end of `conn`, if one is known.
    fn recorder(&self, conn: Conn) -> Option<SocketAddr> {
        let ip = IpAddr::V4(Ipv4Addr::from(conn.remote.0));
        if let Some(peer) = self.peers.iter().find(|p| p.ip() == ip) {
            return Some(*peer);
        }
        // A loopback or unspecified end is this host, or no host.
        (!ip.is_loopback() && !ip.is_unspecified())
            .then_some(self.port)
            .flatten()
            .map(|port| SocketAddr::new(ip, port))
    }
}

/// The traveling side of a recording's triggers.
pub struct Travel {
    pub recent: Recent,
    /// Connections' newest TCP segments, to bound the clocks with peers.
    pub segments: Segments,
    routes: Routes,
    me: String,
    /// Ids kept (or refused) already, oldest first: a loop ends here.
    seen: HashSet<String>,
    seen_order: VecDeque<String>,
    /// This host's firings that traveled, with their windows.
    fired: Vec<Firing>,
    /// Firings received, for `weft.json` and `info` (the first
    /// [`MAX_LOGGED`]; the rest are counted).
    received: Vec<Received>,
    unlogged: u64,
    sent: Arc<Mutex<Vec<Sent>>>,
    jobs: mpsc::SyncSender<(SocketAddr, PinRequest, Instant)>,
    /// Local firings waiting for the end of the drain (the thread's
    /// connections may arrive in the same batch as its trigger).
    waiting: Vec<Waiting>,
}

/// A local firing waiting for the end of its drain.
struct Waiting {
    id: String,
    condition: String,
    tid: u32,
    window: (u64, u64),
    fired_wall: i64,
}

impl std::fmt::Debug for Travel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Travel")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

/// Firings received, and requests sent, listed in `weft.json` at most.
const MAX_LOGGED: usize = 4096;

/// Ids remembered at most.
const MAX_SEEN: usize = 4096;

/// Requests waiting to be sent at most; past it a firing's requests are
/// dropped and counted in its notes.
const MAX_JOBS: usize = 256;

/// How far apart two hosts' clocks may be, ns, when nothing was measured:
/// the window is widened by it.
pub const DEFAULT_CLOCK_ERROR: u64 = 50_000_000;

impl Travel {
    /// Starts the thread that asks peers, with `secret`.
    pub fn start(routes: Routes, secret: Arc<Secret>, horizon: u64, me: String) -> Self {
        let (jobs, queue) = mpsc::sync_channel(MAX_JOBS);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&sent);
        std::thread::Builder::new()
            .name("weft-travel".into())
            .spawn(move || ask_peers(&queue, &secret, &log))
            .expect("a thread starts");
        Self {
            recent: Recent::new(horizon),
            segments: Segments::new(horizon),
            routes,
            me,
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            fired: Vec::new(),
            received: Vec::new(),
            unlogged: 0,
            sent,
            jobs,
            waiting: Vec::new(),
        }
    }

    /// A trigger fired for thread `tid`, keeping `window` (monotonic ns):
    /// its peers are asked once this drain ends.
    pub fn fired(&mut self, rule: usize, condition: String, tid: u32, window: (u64, u64)) {
        let id = format!("{}/{rule}/{}", self.me, wall(window.0));
        self.remember(&id);
        if self.fired.len() < MAX_LOGGED {
            self.fired.push(Firing {
                id: id.clone(),
                rule,
                condition: condition.clone(),
                window_ns: [window.0, window.1],
            });
        }
        self.waiting.push(Waiting {
            id,
            condition,
            tid,
            window,
            fired_wall: now_wall(),
        });
    }

    /// Asks the peers of the firings since the last drain.
    pub fn drained(&mut self) {
        for firing in std::mem::take(&mut self.waiting) {
            let window = firing.window;
            let conns = self
                .recent
                .of_thread(firing.tid, (window.0, weft_store::now_ns()));
            let request = |via: Conn| PinRequest {
                id: firing.id.clone(),
                origin: self.me.clone(),
                condition: firing.condition.clone(),
                fired_wall: firing.fired_wall,
                from: self.me.clone(),
                hop: 1,
                hops_left: self.routes.hops.saturating_sub(1),
                start_wall: wall(window.0),
                end_wall: wall(window.1),
                offset_ns: None,
                error_ns: DEFAULT_CLOCK_ERROR,
                via,
                segments: self.segments.of(via, segments::SENT),
                sent_wall: 0,
            };
            self.send(conns.into_iter().map(request).collect());
        }
    }

    /// Whether a peer's firing `id` is new here; it is remembered either way.
    pub fn first_time(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        self.remember(id);
        true
    }

    fn remember(&mut self, id: &str) {
        if self.seen_order.len() >= MAX_SEEN
            && let Some(old) = self.seen_order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.seen.insert(id.to_owned());
        self.seen_order.push_back(id.to_owned());
    }

    /// Where `request`'s window lies on this host's clock: bounded by the
    /// segments both hosts saw on its connection (`segments`, from
    /// [`Travel::segments_clock`]) when they say more than the asker's
    /// estimate, else the asker's.
    pub fn clock(request: &PinRequest, segments: Option<Offset>) -> Clock {
        let asked = Clock {
            offset_ns: request.offset_ns.unwrap_or(0),
            error_ns: request.error_ns,
            from: if request.offset_ns.is_some() {
                "exchange"
            } else {
                "unmeasured"
            },
        };
        match segments {
            Some(o) if o.error_ns < asked.error_ns => Clock {
                offset_ns: o.offset_ns,
                error_ns: o.error_ns,
                from: "segments",
            },
            _ => asked,
        }
    }

    /// This host's clock minus `request`'s asker's, from the segments both
    /// saw on its connection.
    pub fn segments_clock(&self, request: &PinRequest) -> Option<Offset> {
        self.segments
            .offset(request.via.reversed(), &request.segments)
    }

    /// Notes a peer's firing and what came of it: kept over `window`
    /// (monotonic ns), or not; its window placed on this clock by `clock`.
    pub fn received(
        &mut self,
        request: &PinRequest,
        clock: Clock,
        window: Option<(u64, u64)>,
        note: &str,
    ) {
        let kept = window.is_some();
        if self.received.len() >= MAX_LOGGED {
            self.unlogged += 1;
            return;
        }
        self.received.push(Received {
            id: request.id.clone(),
            from: request.from.clone(),
            origin: request.origin.clone(),
            condition: request.condition.clone(),
            hop: request.hop,
            fired_wall_ns: request.fired_wall,
            start_wall_ns: request.start_wall,
            end_wall_ns: request.end_wall,
            answered_wall_ns: now_wall(),
            kept,
            window_ns: window.map(|(start, end)| [start, end]),
            note: note.to_owned(),
            // As `sent` has it: the peer's clock minus this one's.
            clock_offset_ns: Some(clock.offset_ns.saturating_neg()),
            clock_error_ns: Some(clock.error_ns),
            clock_from: Some(clock.from.to_owned()),
        });
    }

    /// Asks along the connections of the threads that served `request`'s
    /// connection here in `window`, a hop further, to keep `window` (this
    /// host's, already widened by the error of its clock against the
    /// asker's, so errors add up along the chain).
    pub fn forward(&mut self, request: &PinRequest, window: (u64, u64)) {
        // A peer may ask for more hops than this host lets a firing travel.
        let hops_left = request.hops_left.min(self.routes.hops);
        if hops_left == 0 {
            return;
        }
        let came = request.via.reversed();
        let mut onward = Vec::new();
        for tid in self.recent.threads_on(came, window) {
            onward.extend(
                self.recent
                    .of_thread(tid, window)
                    .into_iter()
                    .filter(|c| *c != came),
            );
        }
        let requests = onward
            .into_iter()
            .map(|via| PinRequest {
                from: self.me.clone(),
                hop: request.hop.saturating_add(1),
                hops_left: hops_left - 1,
                start_wall: wall(window.0),
                end_wall: wall(window.1),
                offset_ns: None,
                error_ns: DEFAULT_CLOCK_ERROR,
                via,
                segments: self.segments.of(via, segments::SENT),
                ..request.clone()
            })
            .collect();
        self.send(requests);
    }

    /// Hands `requests` to the asking thread, one per recorder.
    fn send(&mut self, requests: Vec<PinRequest>) {
        let mut asked = HashSet::new();
        for request in requests {
            let Some(peer) = self.routes.recorder(request.via) else {
                continue;
            };
            if asked.insert(peer) && self.jobs.try_send((peer, request, Instant::now())).is_err() {
                log::warn!(
                    "weft: too many peers to ask at once; a firing's request to {peer} is dropped"
                );
            }
        }
    }

    /// What `weft.json` keeps: firings received, requests sent (the
    /// trigger side adds what it kept and refused).
    pub fn log(&self) -> PeerLog {
        let sent = self
            .sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        PeerLog {
            me: self.me.clone(),
            fired: self.fired.clone(),
            received: self.received.clone(),
            received_unlisted: self.unlogged,
            sent,
            ..PeerLog::default()
        }
    }
}

/// Asks each peer its job names until the recording ends. Each exchange
/// also measures the peer's clock (by the segments both saw, else NTP's
/// four times); a request to a peer measured before carries that offset
/// and its error bound, for the peer to place the window on its clock
/// when the segments it sees bound nothing tighter.
fn ask_peers(
    queue: &mpsc::Receiver<(SocketAddr, PinRequest, Instant)>,
    secret: &Arc<Secret>,
    log: &Mutex<Vec<Sent>>,
) {
    let mut peers: HashMap<SocketAddr, Peer> = HashMap::new();
    let mut clocks: HashMap<SocketAddr, (i64, i64)> = HashMap::new();
    while let Ok((addr, mut request, since)) = queue.recv() {
        let peer = match peers.get(&addr) {
            Some(peer) => peer,
            None => match Peer::new(&addr.to_string(), Arc::clone(secret)) {
                Ok(peer) => peers.entry(addr).or_insert(peer),
                Err(error) => {
                    log::warn!("weft: peer {addr}: {error}");
                    continue;
                }
            },
        };
        if let Some((offset, error)) = clocks.get(&addr) {
            request.offset_ns = Some(*offset);
            request.error_ns = error.unsigned_abs().saturating_add(CLOCK_MARGIN);
        }
        let (mut sent, answered) = exchange(peer, addr, &mut request, since);
        if answered {
            clocks.insert(addr, (sent.clock_offset_ns, sent.clock_error_ns));
        }
        sent.to = addr.to_string();
        let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.len() < MAX_LOGGED {
            log.push(sent);
        }
    }
}

/// What is added to a measured clock error: the clocks drift between
/// exchanges.
const CLOCK_MARGIN: u64 = 1_000_000;

/// Sends `request` to `peer` and notes its answer and the clock estimate;
/// whether it answered.
fn exchange(
    peer: &Peer,
    addr: SocketAddr,
    request: &mut PinRequest,
    since: Instant,
) -> (Sent, bool) {
    request.sent_wall = now_wall();
    let answer = serde_json::to_vec(&*request)
        .map_err(|e| e.to_string())
        .and_then(|body| peer.post(PIN, body).map_err(|e| e.to_string()))
        .and_then(|bytes| serde_json::from_slice::<PinReply>(&bytes).map_err(|e| e.to_string()));
    let done = now_wall();
    let mut sent = Sent {
        id: request.id.clone(),
        hop: request.hop,
        ms: since.elapsed().as_secs_f64() * 1e3,
        ..Sent::default()
    };
    let answered = answer.is_ok();
    let clock_from = match answer {
        Ok(reply) => {
            sent.kept = reply.kept;
            sent.note = reply.note;
            // NTP: t1 sent, t2 received, t3 replied, t4 back.
            let (t1, t2, t3, t4) = (
                request.sent_wall,
                reply.received_wall,
                reply.replied_wall,
                done,
            );
            sent.clock_offset_ns = i64::midpoint(t2 - t1, t3 - t4);
            sent.clock_error_ns = ((t4 - t1) - (t3 - t2)) / 2;
            match reply.segments_clock {
                Some(o) if o.error_ns < sent.clock_error_ns.unsigned_abs() => {
                    sent.clock_offset_ns = o.offset_ns;
                    sent.clock_error_ns = i64::try_from(o.error_ns).unwrap_or(i64::MAX);
                    "segments"
                }
                _ => "exchange",
            }
        }
        Err(error) => {
            log::warn!(
                "weft: peer {addr} did not keep firing {}: {error}",
                request.id
            );
            sent.note = error;
            "unmeasured"
        }
    };
    sent.clock_from = clock_from.into();
    (sent, answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::End;

    fn event(tid: u32, ts: u64, local: End, remote: End) -> ConnEvent {
        ConnEvent {
            ts_ns: ts,
            tid,
            saddr: local.0,
            sport: local.1,
            daddr: remote.0,
            dport: remote.1,
            family: 4,
            ..ConnEvent::default()
        }
    }

    #[test]
    fn a_request_travels_along_the_threads_that_served_it() {
        // A proxy thread 7 took a request from the client and asked the
        // server; thread 8 served someone else.
        let (client, proxy, server, other) = ((10, 5000), (11, 8000), (12, 9000), (13, 6000));
        let mut recent = Recent::new(10_000);
        recent.note(&event(7, 100, proxy, client));
        recent.note(&event(7, 150, (11, 40000), server));
        recent.note(&event(8, 120, proxy, other));
        let came = Conn {
            local: proxy,
            remote: client,
        };
        assert_eq!(recent.threads_on(came, (0, 1000)), vec![7]);
        let onward: Vec<Conn> = recent
            .of_thread(7, (0, 1000))
            .into_iter()
            .filter(|c| *c != came)
            .collect();
        assert_eq!(
            onward,
            vec![Conn {
                local: (11, 40000),
                remote: server
            }]
        );
        // Outside the window, nothing.
        assert!(recent.of_thread(7, (200, 300)).is_empty());
    }

    #[test]
    fn routes_go_to_named_peers_or_the_shared_port() {
        let routes = Routes {
            peers: vec!["10.0.0.2:7000".parse().unwrap()],
            port: Some(9465),
            hops: 3,
        };
        let to = |ip: [u8; 4]| Conn {
            local: (0, 1),
            remote: (u32::from(Ipv4Addr::from(ip)), 80),
        };
        assert_eq!(
            routes.recorder(to([10, 0, 0, 2])),
            Some("10.0.0.2:7000".parse().unwrap())
        );
        assert_eq!(
            routes.recorder(to([10, 0, 0, 3])),
            Some("10.0.0.3:9465".parse().unwrap())
        );
        assert_eq!(routes.recorder(to([127, 0, 0, 1])), None);
    }

    #[test]
    fn the_table_stays_bounded() {
        let mut recent = Recent::new(1_000);
        for i in 0..(MAX_PER_THREAD as u16 + 10) {
            recent.note(&event(1, u64::from(i), (1, i), (2, 80)));
        }
        assert_eq!(recent.of_thread(1, (0, u64::MAX)).len(), MAX_PER_THREAD);
        recent.note(&event(2, 1_000_000, (1, 1), (2, 80)));
        assert!(
            recent.of_thread(1, (0, u64::MAX)).is_empty(),
            "pruned past the horizon"
        );
    }
}
