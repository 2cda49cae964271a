//! `weft doctor`: `weft_kernel::doctor`'s checks of this kernel and
//! process, with weft's event sources, printed one per line.

use std::process::ExitCode;

use weft_capture::sources;
use weft_kernel::doctor;

use crate::cli::DoctorArgs;

pub fn run(args: &DoctorArgs) -> ExitCode {
    let hooks: Vec<_> = sources::ALL
        .iter()
        .map(|spec| weft_recording::hooks(spec))
        .collect();
    let checks = doctor::checks(&hooks);
    for check in &checks {
        if args.json {
            let line = serde_json::json!({
                "check": check.what,
                "ok": check.ok,
                "detail": check.detail,
            });
            println!("{line}");
            continue;
        }
        println!(
            "{:<26} {:<4} {}",
            check.what,
            match check.ok {
                Some(true) => "ok",
                Some(false) => "no",
                None => "?",
            },
            check.detail
        );
    }
    if doctor::usable(&checks) {
        ExitCode::SUCCESS
    } else {
        if !args.json {
            println!("weft cannot trace here; see the lines marked `no`");
        }
        ExitCode::from(1)
    }
}
