//! Two hosts' clocks bounded by the TCP segments both of them saw, NTP's
//! bound without NTP: a segment that left host A at `a` (A's clock) and
//! reached host B at `b` (B's clock) says B's clock minus A's is at most
//! `b - a`, as no wire takes negative time; one that left B at `b` and
//! reached A at `a` says it is at least `b - a`. The tightest bound each
//! way over a connection's recent segments gives the offset (their middle)
//! and its error (half their distance). The packets are the `net` source's,
//! seen by TC as they leave and arrive, so the bound is the wire's time
//! between the two hosts' TC hooks, not a request's time in user space.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use weft_abi::net::{Direction, PacketEvent};

use crate::hosts::{Conn, wall};

/// What tells a segment apart on both hosts: its sequence and
/// acknowledgement numbers, flags and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Segment {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: u32,
}

/// A segment one host saw: whether it sent it, and when (wall-clock ns
/// since the epoch, its own clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub segment: Segment,
    pub sent: bool,
    pub wall_ns: i64,
}

/// A clock estimate: one host's clock minus another's, and the bound on
/// its error, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offset {
    pub offset_ns: i64,
    pub error_ns: u64,
}

/// Segments kept per connection and direction: the newest.
const KEPT: usize = 64;

/// Segments per direction sent to a peer with a firing: the newest.
pub const SENT: usize = 32;

/// Connections kept at most; past it the table forgets what is oldest.
const MAX_CONNS: usize = 4096;

/// Each connection's newest segments, each way.
#[derive(Default)]
struct Recent {
    /// Each with its `CLOCK_MONOTONIC` time.
    sent: VecDeque<(Segment, u64)>,
    received: VecDeque<(Segment, u64)>,
    /// When one was last noted, `CLOCK_MONOTONIC` ns.
    last: u64,
}

/// The newest TCP segments of each connection, kept for
/// the horizon after the connection's last one and bounded.
pub struct Segments {
    by_conn: HashMap<Conn, Recent>,
    /// How long a connection's segments are kept: the longest window a
    /// firing keeps.
    horizon: u64,
    pruned: u64,
}

impl Segments {
    pub fn new(horizon: u64) -> Self {
        Self {
            by_conn: HashMap::new(),
            horizon,
            pruned: 0,
        }
    }

    /// Notes a `net` record: IPv4 TCP only, as connections are.
    pub fn note(&mut self, packet: &PacketEvent) {
        if packet.family != 4 || packet.proto != 6 {
            return;
        }
        let (from, to) = ((packet.saddr, packet.sport), (packet.daddr, packet.dport));
        let sent = packet.dir == Direction::Egress as u8;
        let conn = if sent {
            Conn {
                local: from,
                remote: to,
            }
        } else {
            Conn {
                local: to,
                remote: from,
            }
        };
        let now = packet.ts_ns;
        if now.saturating_sub(self.pruned) > self.horizon
            || (self.by_conn.len() >= MAX_CONNS && !self.by_conn.contains_key(&conn))
        {
            self.prune(now);
        }
        let recent = self.by_conn.entry(conn).or_default();
        recent.last = now;
        let way = if sent {
            &mut recent.sent
        } else {
            &mut recent.received
        };
        if way.len() == KEPT {
            way.pop_front();
        }
        let segment = Segment {
            seq: packet.seq,
            ack: packet.ack,
            flags: packet.tcp_flags,
            payload: packet.payload,
        };
        way.push_back((segment, now));
    }

    fn prune(&mut self, now: u64) {
        let since = now.saturating_sub(self.horizon);
        self.by_conn.retain(|_, recent| recent.last >= since);
        if self.by_conn.len() >= MAX_CONNS {
            self.by_conn.clear();
        }
        self.pruned = now;
    }

    /// `conn`'s newest segments, at most `most` each way.
    pub fn of(&self, conn: Conn, most: usize) -> Vec<Seen> {
        let Some(recent) = self.by_conn.get(&conn) else {
            return Vec::new();
        };
        let newest = |way: &VecDeque<(Segment, u64)>, sent: bool| {
            let skip = way.len().saturating_sub(most);
            way.iter()
                .skip(skip)
                .map(move |&(segment, mono)| Seen {
                    segment,
                    sent,
                    wall_ns: wall(mono),
                })
                .collect::<Vec<_>>()
        };
        let mut seen = newest(&recent.sent, true);
        seen.extend(newest(&recent.received, false));
        seen
    }

    /// This host's clock minus a peer's, from the segments the peer saw on
    /// a connection (`theirs`, at most [`SENT`] each way are read) and
    /// those this host saw on it (`conn`, as this host names it); `None`
    /// unless segments matched both ways.
    pub fn offset(&self, conn: Conn, theirs: &[Seen]) -> Option<Offset> {
        let theirs = &theirs[..theirs.len().min(2 * SENT)];
        offset(&self.of(conn, KEPT), theirs)
    }
}

/// `mine`'s host's clock minus `theirs`' host's, from the segments that
/// appear once in each list, sent by one and received by the other.
/// A segment seen twice (a retransmission, a repeated ACK) is left out:
/// its copies could be paired wrongly and break the bound.
pub fn offset(mine: &[Seen], theirs: &[Seen]) -> Option<Offset> {
    let once = |seen: &[Seen]| {
        let mut times: HashMap<(Segment, bool), Option<i64>> = HashMap::new();
        for s in seen {
            times
                .entry((s.segment, s.sent))
                .and_modify(|t| *t = None)
                .or_insert(Some(s.wall_ns));
        }
        times
    };
    let mine = once(mine);
    let (mut at_most, mut at_least) = (None::<i64>, None::<i64>);
    for ((segment, they_sent), their_time) in once(theirs) {
        let (Some(their_time), Some(Some(my_time))) =
            (their_time, mine.get(&(segment, !they_sent)))
        else {
            continue;
        };
        let gap = my_time.saturating_sub(their_time);
        if they_sent {
            at_most = Some(at_most.map_or(gap, |m| m.min(gap)));
        } else {
            at_least = Some(at_least.map_or(gap, |m| m.max(gap)));
        }
    }
    let (low, high) = (at_least?, at_most?);
    // A clock stepped between the segments: no bound holds.
    (low <= high).then(|| Offset {
        offset_ns: i64::midpoint(low, high),
        error_ns: (high - low).unsigned_abs().div_ceil(2),
    })
}

/// A TCP segment between `local` (this host) and `remote` as TC would
/// record it, with an ACK, acknowledgement 9 and 10 bytes of payload.
#[cfg(test)]
pub(crate) fn packet(
    (local, remote): (crate::hosts::End, crate::hosts::End),
    dir: Direction,
    seq: u32,
    ts_ns: u64,
) -> PacketEvent {
    let (from, to) = if dir == Direction::Egress {
        (local, remote)
    } else {
        (remote, local)
    };
    PacketEvent {
        family: 4,
        proto: 6,
        dir: dir as u8,
        saddr: from.0,
        sport: from.1,
        daddr: to.0,
        dport: to.1,
        seq,
        ack: 9,
        tcp_flags: 16,
        payload: 10,
        ts_ns,
        ..PacketEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(seq: u32, sent: bool, wall_ns: i64) -> Seen {
        Seen {
            segment: Segment {
                seq,
                ack: 7,
                flags: 16,
                payload: 100,
            },
            sent,
            wall_ns,
        }
    }

    #[test]
    fn segments_both_ways_bound_the_offset() {
        // B's clock is 1000 ns ahead of A's; the wire takes 30 to 80 ns.
        let a = [seen(1, true, 0), seen(2, false, 530)];
        let b = [seen(1, false, 1_000 + 50), seen(2, true, 1_500)];
        // A's segment 1 arrived 50 ns later (+1000): B - A <= 1050; B's
        // segment 2 left at 500 A-time and arrived at 530: B - A >= 970.
        let o = offset(&b, &a).unwrap();
        assert_eq!((o.offset_ns, o.error_ns), (1_010, 40));
        assert!((o.offset_ns - 1_000).unsigned_abs() <= o.error_ns);
        let back = offset(&a, &b).unwrap();
        assert_eq!((back.offset_ns, back.error_ns), (-1_010, 40));
    }

    #[test]
    fn one_way_or_repeated_segments_bound_nothing() {
        let a = [seen(1, true, 0), seen(3, true, 10)];
        let b = [seen(1, false, 50), seen(3, false, 60)];
        assert_eq!(offset(&b, &a), None, "one way only");
        // Segment 2 sent twice by B (a retransmission): its first copy
        // must not be paired with A's receipt of the second.
        let a = [seen(1, true, 0), seen(2, false, 900)];
        let b = [seen(1, false, 50), seen(2, true, 100), seen(2, true, 880)];
        assert_eq!(offset(&b, &a), None);
    }

    #[test]
    fn a_host_s_packets_are_kept_per_connection_and_bounded() {
        let mut segments = Segments::new(1_000_000_000);
        let ends = ((10, 5000), (11, 80));
        for i in 0..100 {
            segments.note(&packet(ends, Direction::Egress, i, u64::from(i)));
            segments.note(&packet(ends, Direction::Ingress, 1000 + i, u64::from(i)));
        }
        let conn = Conn {
            local: (10, 5000),
            remote: (11, 80),
        };
        let seen = segments.of(conn, SENT);
        assert_eq!(seen.len(), 2 * SENT);
        assert_eq!(seen[0].segment.seq, 100 - SENT as u32, "the newest");
        assert!(seen[..SENT].iter().all(|s| s.sent));
        assert_eq!(seen[SENT].segment.seq, 1100 - SENT as u32);
        assert!(segments.of(conn.reversed(), SENT).is_empty());
    }
}
