//! `conns`: which thread used which TCP or UDP socket (`probes::conns`):
//! its addresses and ports, once a second per thread, socket and direction.
//! A trigger finds the connections of the thread that fired here, and so
//! the hosts that served the same request.

use std::mem::offset_of;

use weft_abi::conns::ConnEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

const DIRECTIONS: &[(i64, &str)] = &[(0, "recv"), (1, "send")];
const PROTOCOLS: &[(i64, &str)] = &[(6, "tcp"), (17, "udp")];

pub const SPEC: Spec = Spec {
    name: "conns",
    size: size_of::<ConnEvent>(),
    aliases: &["connections"],
    about: "which thread sent or received on which TCP or UDP socket: addresses and ports, once a second per thread, socket and direction",
    fields: &[
        CPU,
        field(
            "ts",
            offset_of!(ConnEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when the thread sent or received",
        ),
        field(
            "pid",
            offset_of!(ConnEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "the thread's process",
        ),
        field(
            "tid",
            offset_of!(ConnEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "the thread",
        ),
        field(
            "saddr",
            offset_of!(ConnEvent, saddr),
            FieldKind::U32,
            Meaning::Addr(offset_of!(ConnEvent, saddr6)),
            "this end's address (IPv6 addresses are not read yet: ::)",
        ),
        field(
            "sport",
            offset_of!(ConnEvent, sport),
            FieldKind::U16,
            Meaning::Int,
            "this end's port",
        ),
        field(
            "daddr",
            offset_of!(ConnEvent, daddr),
            FieldKind::U32,
            Meaning::Addr(offset_of!(ConnEvent, daddr6)),
            "the other end's address (0.0.0.0 for an unconnected UDP socket)",
        ),
        field(
            "dport",
            offset_of!(ConnEvent, dport),
            FieldKind::U16,
            Meaning::Int,
            "the other end's port",
        ),
        field(
            "family",
            offset_of!(ConnEvent, family),
            FieldKind::U8,
            Meaning::Int,
            "4 or 6",
        ),
        field(
            "proto",
            offset_of!(ConnEvent, proto),
            FieldKind::U8,
            Meaning::Named(PROTOCOLS),
            "tcp or udp",
        ),
        field(
            "dir",
            offset_of!(ConnEvent, dir),
            FieldKind::U8,
            Meaning::Named(DIRECTIONS),
            "send or recv",
        ),
        field(
            "bytes",
            offset_of!(ConnEvent, bytes),
            FieldKind::I32,
            Meaning::Int,
            "bytes the call moved (negative: an errno)",
        ),
    ],
    indexes: &[IndexSpec::Exact("dport", 65_535)],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: None,
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
