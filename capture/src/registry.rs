//! The names of the sources weft records itself, and what the fields of
//! the sources others push mean. Producers and readers take their names
//! from here, so that this module sits below every one of them and none
//! reaches into another for a name.
//!
//! Must not depend on the modules that produce or read these sources.

use weft_query::Kind;

use crate::sources;

pub use weft_ingest::{syscalls::SYSCALLS, tasks::TASKS};

/// The trigger log: one record per firing (`trigger.rs`).
pub const TRIGGERS: &str = "triggers";
/// Intel PT calls, decoded after their capture (`pt_calls.rs`).
pub const CALLS: &str = "calls";
/// The names of the calls' functions (`pt_calls.rs`).
pub const SYMBOLS: &str = "symbols";
/// What each source lost, when and why (`recording/src/losses.rs`).
pub const LOSSES: &str = "losses";
/// The functions of the recorded stacks, by id (`recording/src/frames.rs`).
pub const FRAMES: &str = "frames";
/// The names of the `args` records' files, by number (`recording/src/files.rs`).
pub const PATHS: &str = "paths";

/// Whether weft itself names a source `name` (or lets queries call one
/// so): applications and one-liners may not take it.
pub fn is_weft_source(name: &str) -> bool {
    sources::EVERY
        .iter()
        .any(|spec| spec.name == name || spec.aliases.contains(&name))
}

/// What the integers of a field pushed by an application or stored by a
/// one-liner mean (the store's `FieldKind` is their width): the app
/// protocol's kinds, which `weft.json` names the same way.
pub use weft_client::protocol::Kind as ValueKind;

/// The query kind of a field whose kind `weft.json` names `name` (a
/// trace id's is [`Kind::Id`], given by the catalog with its table).
pub fn query_kind(name: &str) -> Kind {
    match ValueKind::parse(name) {
        Some(ValueKind::Duration) => Kind::Duration,
        Some(ValueKind::Time) => Kind::Time,
        Some(ValueKind::SpanId) => Kind::Hex,
        _ => Kind::Int,
    }
}

/// The store fields of an application source: an `i64` per value of a
/// record, a trace id's low 64 bits in a field of their own after its
/// high ones ([`low_half`]).
pub fn app_fields(fields: &[(String, ValueKind)]) -> Vec<weft_store::Field> {
    let names = fields.iter().flat_map(|(field, kind)| match kind {
        ValueKind::TraceId => vec![field.clone(), low_half(field)],
        _ => vec![field.clone()],
    });
    names
        .zip(0u32..)
        .map(|(name, i)| weft_store::Field::new(&name, i * 8, weft_store::FieldKind::I64))
        .collect()
}

/// The store field of trace id `field`'s low 64 bits (the protocol's names
/// hold no `.`).
pub fn low_half(field: &str) -> String {
    format!("{field}.lo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weft_sources_and_their_aliases_are_reserved() {
        for name in [
            "syscalls",
            "tasks",
            "triggers",
            "calls",
            "symbols",
            "sched",
            "net",
            "packets",
            "pagecache",
        ] {
            assert!(is_weft_source(name), "{name}");
        }
        assert!(!is_weft_source("requests"));
    }

    #[test]
    fn value_kinds_round_trip_their_names() {
        for kind in [ValueKind::Int, ValueKind::Duration, ValueKind::Time] {
            assert_eq!(ValueKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(ValueKind::parse("float"), None);
    }
}
