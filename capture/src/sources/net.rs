//! `net`: one record per packet seen by TC on the chosen interfaces
//! (`probes::net`).

use std::mem::offset_of;

use weft_abi::net::PacketEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

const DIRECTIONS: &[(i64, &str)] = &[(0, "ingress"), (1, "egress")];
const PROTOCOLS: &[(i64, &str)] = &[(1, "icmp"), (6, "tcp"), (17, "udp"), (58, "icmpv6")];

pub const SPEC: Spec = Spec {
    name: "net",
    size: size_of::<PacketEvent>(),
    aliases: &["packets"],
    about: "packets on ingress and egress (TC): addresses, ports, length, TTL, TCP flags, sequence numbers and window",
    fields: &[
        CPU,
        field(
            "ifindex",
            offset_of!(PacketEvent, ifindex),
            FieldKind::U32,
            Meaning::Int,
            "interface index",
        ),
        field(
            "len",
            offset_of!(PacketEvent, len),
            FieldKind::U32,
            Meaning::Int,
            "bytes, link header included",
        ),
        field(
            "ts",
            offset_of!(PacketEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when TC saw it",
        ),
        field(
            "dir",
            offset_of!(PacketEvent, dir),
            FieldKind::U8,
            Meaning::Named(DIRECTIONS),
            "ingress or egress",
        ),
        field(
            "proto",
            offset_of!(PacketEvent, proto),
            FieldKind::U8,
            Meaning::Named(PROTOCOLS),
            "tcp, udp, icmp, icmpv6 or the IP protocol number",
        ),
        field(
            "saddr",
            offset_of!(PacketEvent, saddr),
            FieldKind::U32,
            Meaning::Addr(offset_of!(PacketEvent, saddr6)),
            "source address, IPv4 or IPv6",
        ),
        field(
            "sport",
            offset_of!(PacketEvent, sport),
            FieldKind::U16,
            Meaning::Int,
            "source port",
        ),
        field(
            "daddr",
            offset_of!(PacketEvent, daddr),
            FieldKind::U32,
            Meaning::Addr(offset_of!(PacketEvent, daddr6)),
            "destination address, IPv4 or IPv6",
        ),
        field(
            "dport",
            offset_of!(PacketEvent, dport),
            FieldKind::U16,
            Meaning::Int,
            "destination port",
        ),
        field(
            "payload",
            offset_of!(PacketEvent, payload),
            FieldKind::U32,
            Meaning::Int,
            "transport payload bytes",
        ),
        field(
            "captured",
            offset_of!(PacketEvent, captured),
            FieldKind::U32,
            Meaning::Int,
            "payload bytes kept in `data` (--snaplen)",
        ),
        field(
            "family",
            offset_of!(PacketEvent, family),
            FieldKind::U8,
            Meaning::Int,
            "4 or 6",
        ),
        field(
            "tcp_flags",
            offset_of!(PacketEvent, tcp_flags),
            FieldKind::U8,
            Meaning::Int,
            "FIN 1, SYN 2, RST 4, PSH 8, ACK 16",
        ),
        field(
            "seq",
            offset_of!(PacketEvent, seq),
            FieldKind::U32,
            Meaning::Int,
            "TCP sequence number",
        ),
        field(
            "ack",
            offset_of!(PacketEvent, ack),
            FieldKind::U32,
            Meaning::Int,
            "TCP acknowledgement number",
        ),
        field(
            "window",
            offset_of!(PacketEvent, window),
            FieldKind::U16,
            Meaning::Int,
            "TCP window as sent (before the SYN's scale)",
        ),
        field(
            "ttl",
            offset_of!(PacketEvent, ttl),
            FieldKind::U8,
            Meaning::Int,
            "IPv4 TTL or IPv6 hop limit",
        ),
    ],
    indexes: &[
        IndexSpec::Exact("dport", 65_535),
        IndexSpec::Exact("sport", 65_535),
        // The overview's headline, `count, sum(len)`.
        IndexSpec::Latency("len"),
    ],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: None,
    tail: Some(("data", "the payload's first `captured` bytes (--snaplen)")),
    threads: true,
    first: &[],
    late: None,
};
