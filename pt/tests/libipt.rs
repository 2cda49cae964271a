//! Agreement with libipt on its own decoder tests (`tests/libipt/`, BSD-3,
//! see its LICENSE and README.md): every packet listing ptdump printed must
//! be printed by `weft pt dump`, up to whitespace. The cases where weft
//! deliberately differs, or that need a feature not built yet, are listed in
//! `docs/pt.md` and here; the test fails if one of them starts to agree
//! (so the list stays true) or any other case disagrees.

use std::path::{Path, PathBuf};

use serde_json::Value;
use weft_pt::Errata;
use weft_pt::dump::{self, Options};
use weft_pt::flow::Flow;
use weft_pt::image::Image;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/libipt")
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(corpus().join("manifest.json")).expect("manifest.json");
    let manifest: Value = serde_json::from_str(&text).expect("manifest parses");
    manifest["tests"].as_array().expect("tests list").clone()
}

/// Lines with their whitespace runs collapsed: ptdump's column widths in the
/// expectations were typed by the test authors, not printed by ptdump.
fn normalise(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect()
}

/// ptdump options the listing supports; `None` for ones it does not.
fn dump_options(case: &Value) -> Option<Options> {
    let mut options = Options::default();
    if let Some(cpu) = case["cpu"].as_str() {
        options.errata = Errata::for_cpu(cpu.parse().unwrap());
    }
    let opts = case["ptdump_opts"].as_str().unwrap();
    for opt in opts.split_whitespace() {
        match opt {
            "--no-offset" => options.offsets = false,
            "--no-sync" => options.sync = false,
            _ => return None,
        }
    }
    Some(options)
}

/// Runs weft does not agree with yet, with the reason (docs/pt.md).
const DUMP_DIFFERENCES: &[(&str, &str)] = &[];

#[test]
fn packet_listings_match_ptdump() {
    let mut checked = 0;
    let mut unsupported = Vec::new();
    let mut failures = Vec::new();
    for case in manifest() {
        let dir = case["dir"].as_str().unwrap();
        let Some(expected) = case["ptdump_exp"].as_array().and_then(|e| e.first()) else {
            continue;
        };
        let Some(options) = dump_options(&case) else {
            unsupported.push(format!("{dir} ({})", case["ptdump_opts"].as_str().unwrap()));
            continue;
        };
        let trace = std::fs::read(corpus().join(case["pt"].as_str().unwrap())).unwrap();
        let expected = std::fs::read_to_string(corpus().join(expected.as_str().unwrap())).unwrap();
        let mut out = Vec::new();
        dump::dump(&trace, options, &mut out).unwrap();
        let got = normalise(&String::from_utf8(out).unwrap());
        let want = normalise(&expected);
        let known = DUMP_DIFFERENCES.iter().any(|(d, _)| *d == dir);
        if (got == want) == known {
            failures.push(describe(dir, &got, &want, known));
        }
        checked += 1;
    }
    eprintln!(
        "{checked} listings compared; options not supported: {}",
        unsupported.len()
    );
    for case in &unsupported {
        eprintln!("  not compared: {case}");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 300, "only {checked} listings compared");
}

fn describe(dir: &str, got: &[String], want: &[String], known: bool) -> String {
    if known {
        return format!("{dir}: listed as differing but now agrees; remove it from the list");
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    format!(
        "{dir}: line {}: got {:?}, want {:?}",
        at + 1,
        got.get(at).map_or("<end>", String::as_str),
        want.get(at).map_or("<end>", String::as_str)
    )
}

/// Flows weft does not agree with yet, with the reason (docs/pt.md).
const FLOW_DIFFERENCES: &[(&str, &str)] = &[
    (
        "apl12-tip_pge@cpu_6/92",
        "erratum APL12 (VMCS and PIP after a TIP.PGE) not handled",
    ),
    (
        "apl12-tip_pge@cpu_6/95",
        "erratum APL12 (VMCS and PIP after a TIP.PGE) not handled",
    ),
    (
        "bdm64-tnt-cond-xabort@cpu_6/61",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-cond-xabort@cpu_6/71",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-cond-xabort@cpu_6/79",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-cond-xabort@cpu_6/86",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-ind_call-xabort@cpu_6/61",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-ind_call-xabort@cpu_6/71",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-ind_call-xabort@cpu_6/79",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "bdm64-tnt-ind_call-xabort@cpu_6/86",
        "erratum BDM64 (TSX abort FUP with a wrong IP) not handled",
    ),
    (
        "pip-pip_mov_cr3-fail",
        "the error names the offset of the packet the walk was at, libipt the one after it",
    ),
    (
        "ptet-evd_cr2-cfe_iret",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-evd_cr2-evd_vmxq",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-evd_vmxr-cfe_rsm",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-init-sipi",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-int-int-erets-eretu",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-int-iret-cpl_0",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-int-iret",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-smi-rsm",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-uint-uiret",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-vmexit-vmentry-nonroot",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-vmexit-vmentry-root",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "ptet-vmexit-vmentry",
        "CFE/EVD events (event tracing) are skipped, not decoded into events yet",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/78",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/94",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/142",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/158",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/165",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
    (
        "skd010-mode_tsx-fup@cpu_6/166",
        "erratum SKD010 with a MODE.TSX after the OVF not handled",
    ),
];

#[test]
fn instruction_flows_match_ptxed() {
    let mut checked = 0;
    let mut skipped = Vec::new();
    let mut failures = Vec::new();
    for case in manifest() {
        let dir = case["dir"].as_str().unwrap();
        let Some(expected) = case["ptxed_exp"].as_array().and_then(|e| e.first()) else {
            continue;
        };
        let opts = case["ptxed_opts"].as_str().unwrap();
        if !opts.is_empty() || !case["sideband"].as_array().unwrap().is_empty() {
            skipped.push(format!("{dir} ({opts})"));
            continue;
        }
        let errata = case["cpu"]
            .as_str()
            .map(|cpu| Errata::for_cpu(cpu.parse().unwrap()))
            .unwrap_or_default();
        let trace = std::fs::read(corpus().join(case["pt"].as_str().unwrap())).unwrap();
        let code = std::fs::read(corpus().join(case["bin"].as_str().unwrap())).unwrap();
        let org = u64::from_str_radix(case["org"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
        let mut image = Image::new();
        image.add(org, code);
        let mut lines = Vec::new();
        Flow::new(&trace, &image, errata).run(&mut |step| lines.push(step.to_string()));
        let got = normalise(&lines.join("\n"));
        let want =
            normalise(&std::fs::read_to_string(corpus().join(expected.as_str().unwrap())).unwrap());
        let known = FLOW_DIFFERENCES.iter().any(|(d, _)| *d == dir);
        if (got == want) == known {
            failures.push(describe(dir, &got, &want, known));
        }
        checked += 1;
    }
    eprintln!(
        "{checked} flows compared; not compared (options or sideband): {}",
        skipped.len()
    );
    for case in &skipped {
        eprintln!("  not compared: {case}");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 230, "only {checked} flows compared");
}
