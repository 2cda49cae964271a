//! Agreement with libipt on its own decoder tests (`tests/libipt/`, BSD-3,
//! see its LICENSE and README.md): every packet listing ptdump printed must
//! be printed by `weft pt dump`, and every flow ptxed printed by the flow
//! decoder, up to whitespace, with the test's sideband where it has some.
//! The cases where weft deliberately differs are listed in `docs/pt.md` and
//! here, with the reason; the test fails if one of them starts to agree (so
//! the list stays true), if any other case disagrees, or if a case's options
//! are ones the harness cannot give weft.

mod common;

use common::Case;
use weft_pt::Errata;
use weft_pt::dump::{self, Options, TimeColumn};
use weft_pt::flow::{Flow, Step};
use weft_pt::sideband::SampleFormat;

/// Lines with their whitespace runs collapsed: ptdump's column widths in the
/// expectations were typed by the test authors, not printed by ptdump.
fn normalise(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect()
}

/// The `--sb:*` options among `options`, which are taken out.
fn sideband_format(options: &str) -> (SampleFormat, Vec<&str>) {
    let mut format = SampleFormat::default();
    let mut rest = Vec::new();
    for option in options.split_whitespace() {
        match option {
            "--sb:compact" | "--sb" => format.compact = true,
            "--sb:verbose" => format.verbose = true,
            "--sb:filename" => format.filename = true,
            "--sb:offset" => format.offset = true,
            "--sb:time" => format.time = true,
            "--sb:switch" => format.switches = true,
            "--sb:warn" => format.warnings = true,
            _ => rest.push(option),
        }
    }
    (format, rest)
}

/// ptdump options the listing supports; `None` for ones it does not.
fn dump_options(case: &Case) -> Option<Options> {
    let mut options = Options {
        errata: case.errata(),
        ..Options::default()
    };
    let mut time = TimeColumn::default();
    let (_, rest) = sideband_format(case.str("ptdump_opts"));
    let mut words = rest.into_iter();
    while let Some(opt) = words.next() {
        let mut value = || words.next().and_then(|v| v.parse::<u32>().ok());
        match opt {
            "--no-offset" => options.offsets = false,
            "--raw" => options.raw = true,
            "--lastip" => options.last_ip = true,
            "--exec-mode" => options.exec_mode = true,
            "--cpu" => options.errata = Errata::for_cpu(words.next()?.parse().ok()?),
            "--no-sync" => options.sync = false,
            "--time" => options.time = Some(time),
            "--tcal" => options.tcal = Some(time),
            "--time-delta" => time.delta = true,
            "--no-wall-clock" => time.relative = true,
            "--no-tcal" => options.clocks.calibrate = false,
            "--no-cyc" => options.clocks.cycles = false,
            "--keep-tcal-on-ovf" => options.clocks.keep_calibration_on_overflow = true,
            "--mtc-freq" => options.clocks.mtc_freq = u8::try_from(value()?).ok()?,
            "--nom-freq" => options.clocks.nom_freq = u8::try_from(value()?).ok()?,
            "--cpuid-0x15.eax" => options.clocks.ctc_eax = value()?,
            "--cpuid-0x15.ebx" => options.clocks.ctc_ebx = value()?,
            _ => return None,
        }
    }
    options.time = options.time.map(|_| time);
    options.tcal = options.tcal.map(|_| time);
    Some(options)
}

/// Runs weft does not agree with yet, with the reason (docs/pt.md).
const DUMP_DIFFERENCES: &[(&str, &str)] = &[(
    "bad_cpu",
    "ptdump warns \"failed to determine errata: unknown cpu\" for a CPU missing from its \
     errata table; weft lists the same packets without the warning, since most current CPUs \
     have no errata there and the listing does not depend on it",
)];

#[test]
fn packet_listings_match_ptdump() {
    let mut report = Report::default();
    for case in common::cases() {
        let Some(expected) = case.expected("ptdump_exp") else {
            continue;
        };
        let options = dump_options(&case)
            .unwrap_or_else(|| panic!("{}: ptdump options weft lacks", case.dir()));
        let mut out = Vec::new();
        let (format, _) = sideband_format(case.str("ptdump_opts"));
        let mut session = case.sideband();
        let session = case.has_sideband().then_some((&mut session, format));
        dump::dump_with(&case.trace(), options, session, &mut out).unwrap();
        let got = String::from_utf8(out).unwrap();
        report.compare(case.dir(), &got, &expected, DUMP_DIFFERENCES);
    }
    report.finish("listings", 491);
}

/// The outcome of comparing weft with libipt over the corpus.
#[derive(Default)]
struct Report {
    checked: usize,
    failures: Vec<String>,
}

impl Report {
    /// Compares outputs up to whitespace; a case listed in `differences`
    /// must still differ, so the list stays true.
    fn compare(&mut self, dir: &str, got: &str, want: &str, differences: &[(&str, &str)]) {
        let (got, want) = (normalise(got), normalise(want));
        let known = differences.iter().any(|(d, _)| *d == dir);
        if (got == want) == known {
            self.failures.push(describe(dir, &got, &want, known));
        }
        self.checked += 1;
    }

    fn finish(self, what: &str, at_least: usize) {
        let checked = self.checked;
        eprintln!("{checked} {what} compared");
        assert!(
            self.failures.is_empty(),
            "{} of {checked} disagree:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
        assert!(checked >= at_least, "only {checked} {what} compared");
    }
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
const FLOW_DIFFERENCES: &[(&str, &str)] = &[(
    "bad_cpu",
    "ptxed reports \"config error: unknown cpu\" for a CPU missing from libipt's errata \
     table, then decodes as without errata; weft decodes the same flow without the error, \
     since most current CPUs have no errata there",
)];

#[test]
fn instruction_flows_match_ptxed() {
    let mut report = Report::default();
    for case in common::cases() {
        let Some(expected) = case.expected("ptxed_exp") else {
            continue;
        };
        let (format, rest) = sideband_format(case.str("ptxed_opts"));
        let options = flow_options(&rest)
            .unwrap_or_else(|| panic!("{}: ptxed options weft lacks", case.dir()));
        let (trace, mut image) = (case.trace(), case.image());
        for &(offset, addr) in &options.raw {
            image.add(addr, case.code()[offset as usize..].to_vec());
        }
        let errata = options.cpu.map_or(case.errata(), Errata::for_cpu);
        let (mut lines, mut insns) = (Vec::new(), 0);
        let mut flow = Flow::new(&trace, &image, errata)
            .with_clocks(options.clocks)
            .with_filter(options.filter.clone())
            .with_iflags(options.iflags)
            .with_ticks(options.ticks)
            .with_resync(options.resync);
        if case.has_sideband() {
            flow = flow.with_sideband(case.sideband().with_kernel_start(options.kernel_start));
        }
        flow.run(&mut |step| {
            insns += usize::from(matches!(step, Step::Insn { .. }));
            if step.shown_by_ptxed(format, options.quiet) {
                let line = step.ptxed(options.event_ips).with_times(options.times);
                lines.push(line.with_sideband(format).to_string());
            }
        });
        if options.insn_stat {
            lines.push(format!("insn: {insns}."));
        }
        let expected = if options.block_decoder {
            without_blocks(&expected)
        } else {
            expected
        };
        report.compare(case.dir(), &lines.join("\n"), &expected, FLOW_DIFFERENCES);
    }
    report.finish("flows", 440);
}

/// The ptxed options a flow supports.
#[derive(Default)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "ptxed's switches, one field each"
)]
struct FlowOptions {
    /// The address ranges of `--filter:addrN_cfg 1 --filter:addrN_a A
    /// --filter:addrN_b B` (`FilterEn`).
    filter: Vec<(u64, u64)>,
    /// `--event:ip`
    event_ips: bool,
    /// `--event:iflags`
    iflags: bool,
    /// `--quiet`: only errors (and statistics) are printed.
    quiet: bool,
    /// `--stat` with the instruction count selected (or nothing selected).
    insn_stat: bool,
    /// `--block-decoder` and its `--block:*` options.
    block_decoder: bool,
    /// `--resync-on-error`
    resync: bool,
    /// `--event:tick`
    ticks: bool,
    /// `--event:time`
    times: bool,
    /// `--pevent:kernel-start`
    kernel_start: u64,
    /// `--nom-freq`, `--mtc-freq`, `--cpuid-0x15.*`, `--*:keep-tcal-on-ovf`
    clocks: weft_pt::time::Clocks,
    /// `--cpu`, for its errata.
    cpu: Option<weft_pt::Cpu>,
    /// `--raw FILE:OFFSET:ADDR`: more of the test's code file, from OFFSET,
    /// mapped at ADDR over what is there.
    raw: Vec<(u64, u64)>,
}

/// ptxed's block decoder prints the same flow as its instruction decoder,
/// grouped into the blocks libipt's block API returns (`[block]` lines,
/// `--stat:blocks`). weft has one decoder, whose steps are instructions and
/// events; it is compared with those runs without the grouping lines.
fn without_blocks(expected: &str) -> String {
    expected
        .lines()
        .filter(|line| line.trim() != "[block]" && !line.starts_with("blocks:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// ptxed's options; `None` where they hold one weft's flow lacks.
fn flow_options(options: &[&str]) -> Option<FlowOptions> {
    let mut ranges = std::collections::BTreeMap::<&str, (u64, u64, u64)>::new();
    let mut flow = FlowOptions {
        kernel_start: u64::MAX,
        ..FlowOptions::default()
    };
    let (mut stat, mut selected) = (false, Vec::new());
    let mut words = options.iter().copied();
    while let Some(option) = words.next() {
        let mut number = || {
            let value = words.next()?;
            match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => value.parse().ok(),
            }
        };
        match option {
            "--event:tick" => flow.ticks = true,
            "--event:time" => flow.times = true,
            "--pevent:kernel-start" => flow.kernel_start = number()?,
            "--nom-freq" => flow.clocks.nom_freq = u8::try_from(number()?).ok()?,
            "--mtc-freq" => flow.clocks.mtc_freq = u8::try_from(number()?).ok()?,
            "--cpuid-0x15.eax" => flow.clocks.ctc_eax = u32::try_from(number()?).ok()?,
            "--cpuid-0x15.ebx" => flow.clocks.ctc_ebx = u32::try_from(number()?).ok()?,
            "--insn:keep-tcal-on-ovf" | "--block:keep-tcal-on-ovf" => {
                flow.clocks.keep_calibration_on_overflow = true;
            }
            "--event:ip" => flow.event_ips = true,
            "--event:iflags" => flow.iflags = true,
            "--quiet" => flow.quiet = true,
            "--resync-on-error" => flow.resync = true,
            "--cpu" => flow.cpu = Some(words.next()?.parse().ok()?),
            "--raw" => {
                // FILE:OFFSET:ADDR, the test's own code file.
                let mut parts = words.next()?.split(':').skip(1);
                let mut hex =
                    || u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok();
                flow.raw.push((hex()?, hex()?));
            }
            "--insn-decoder" => {}
            "--stat" => stat = true,
            "--stat:insn" | "--stat:blocks" => selected.push(option),
            "--block-decoder"
            | "--block:show-blocks"
            | "--block:end-on-call"
            | "--block:end-on-jump" => flow.block_decoder = true,
            _ => {
                let (n, field) = option.strip_prefix("--filter:addr")?.split_once('_')?;
                let value = words.next()?;
                let value = match value.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                    None => value.parse().ok()?,
                };
                let range = ranges.entry(n).or_default();
                match field {
                    "cfg" => range.0 = value,
                    "a" => range.1 = value,
                    "b" => range.2 = value,
                    _ => return None,
                }
            }
        }
    }
    // ptxed prints statistics with `--stat` or any `--stat:*`, and collects
    // them all where none is selected.
    flow.insn_stat = (stat || !selected.is_empty())
        && (selected.is_empty() || selected.contains(&"--stat:insn"));
    flow.filter = ranges
        .values()
        .filter(|(cfg, _, _)| *cfg == 1)
        .map(|(_, a, b)| (*a, *b))
        .collect();
    Some(flow)
}
