//! `weft sources`: every source, its fields, and whether it can attach here.

use std::{fmt::Write as _, io::Write as _};

use serde_json::json;
use weft_capture::{
    registry,
    sources::{ALL, Meaning, Spec},
};
use weft_kernel::ebpf;

use crate::cli::SourcesArgs;

pub fn run(args: &SourcesArgs) -> std::process::ExitCode {
    let tracefs = ebpf::tracefs();
    let mut out = String::new();
    for spec in ALL {
        let (missing, lacks) = match &tracefs {
            Ok(tracefs) => {
                let available = weft_recording::hooks(spec).availability(tracefs);
                (available.missing, available.lacks)
            }
            Err(error) => (Some(format!("{error:#}")), Vec::new()),
        };
        if args.json {
            out += &json_line(spec, missing.as_deref(), &lacks);
        } else {
            out += &text(spec, missing.as_deref(), &lacks);
        }
    }
    if !args.json {
        let _ = writeln!(
            out,
            "{}  every completed system call: name, dur, ret, pid, tid, cpu\n  `weft doctor` checks it",
            registry::SYSCALLS
        );
        let _ = writeln!(
            out,
            "app  records programs push through {} (weft-client): sources and fields they declare",
            weft_recording::app::SOCKET
        );
    }
    // A closed stdout (`weft sources | head`) is not an error.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    std::process::ExitCode::SUCCESS
}

fn json_line(spec: &Spec, missing: Option<&str>, lacks: &[String]) -> String {
    let mut fields: Vec<_> = spec
        .fields
        .iter()
        .map(|f| json!({ "name": f.name, "type": kind(f), "unit": unit(f.meaning), "about": f.about }))
        .collect();
    fields.extend(
        spec.tail.map(
            |(name, about)| json!({ "name": name, "type": "bytes", "unit": "", "about": about }),
        ),
    );
    let line = json!({
        "name": spec.name, "about": spec.about, "available": missing.is_none(),
        "why_not": missing, "lacks": lacks, "fields": fields,
    });
    format!("{line}\n")
}

fn text(spec: &Spec, missing: Option<&str>, lacks: &[String]) -> String {
    let status = match (missing, lacks.is_empty()) {
        (Some(why), _) => format!("UNAVAILABLE: {why}"),
        (None, true) => "available".to_owned(),
        (None, false) => format!("available, but {}", lacks.join("; ")),
    };
    let mut out = format!("{}  {}\n  {status}\n", spec.name, spec.about);
    for field in spec.fields {
        let _ = writeln!(
            out,
            "    {:<10} {:<5} {:<4} {}",
            field.name,
            kind(field),
            unit(field.meaning),
            field.about
        );
    }
    if let Some((name, about)) = spec.tail {
        let _ = writeln!(out, "    {name:<10} {:<5} {:<4} {about}", "bytes", "");
    }
    out
}

fn kind(field: &weft_capture::sources::FieldSpec) -> String {
    match field.meaning {
        Meaning::Addr(_) => "addr".to_owned(),
        _ => format!("{:?}", field.kind).to_lowercase(),
    }
}

fn unit(meaning: Meaning) -> &'static str {
    match meaning {
        Meaning::Duration | Meaning::Time => "ns",
        Meaning::Int
        | Meaning::Named(_)
        | Meaning::Addr(_)
        | Meaning::Syscall
        | Meaning::Source
        | Meaning::Symbol
        | Meaning::Path => "",
    }
}
