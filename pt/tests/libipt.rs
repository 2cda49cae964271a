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
