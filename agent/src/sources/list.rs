//! `weft sources`: every source, its fields, and whether it can attach here.

use serde_json::json;

use super::{ALL, Meaning};
use crate::{capture, cli::SourcesArgs, ebpf};

pub fn run(args: &SourcesArgs) -> std::process::ExitCode {
    let tracefs = ebpf::tracefs();
    for spec in ALL {
        let (unavailable, degraded) = match &tracefs {
            Ok(tracefs) => {
                let available = spec.availability(tracefs);
                (available.missing, available.lacks)
            }
            Err(error) => (Some(format!("{error:#}")), Vec::new()),
        };
        if args.json {
            let fields: Vec<_> = spec
                .fields
                .iter()
                .map(|f| json!({ "name": f.name, "type": format!("{:?}", f.kind).to_lowercase(), "unit": unit(f.meaning), "about": f.about }))
                .collect();
            println!(
                "{}",
                json!({ "name": spec.name, "about": spec.about, "available": unavailable.is_none(), "why_not": unavailable, "lacks": degraded, "fields": fields })
            );
            continue;
        }
        let status = unavailable.map_or_else(
            || "available".to_owned(),
            |why| format!("UNAVAILABLE: {why}"),
        );
        println!("{}  {}\n  {status}", spec.name, spec.about);
        for field in spec.fields {
            let unit = unit(field.meaning);
            println!(
                "    {:<10} {:<4} {:<4} {}",
                field.name,
                format!("{:?}", field.kind).to_lowercase(),
                unit,
                field.about
            );
        }
    }
    if !args.json {
        println!(
            "{}  every completed system call: name, dur, ret, pid, tid, cpu\n  `weft doctor` checks it",
            capture::SYSCALLS
        );
        println!(
            "app  records programs push through {} (weft-client): sources and fields they declare",
            crate::app::SOCKET
        );
    }
    std::process::ExitCode::SUCCESS
}

fn unit(meaning: Meaning) -> &'static str {
    match meaning {
        Meaning::Int | Meaning::Named(_) | Meaning::Ipv4 => "",
        Meaning::Duration | Meaning::Time => "ns",
    }
}
