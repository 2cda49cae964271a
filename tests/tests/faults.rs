//! Damaged captures: for each file of a capture and each fault, every
//! command that reads it answers exactly as it did before the fault or
//! fails with a clear error — never a panic, a hang, or a different answer
//! with exit 0. `weft check` finds every fault that a command noticed.
//! Faults: bits flipped, a cut at a random point, a zeroed page, garbage
//! appended, the file deleted; for record segments also a cut at a block
//! boundary and a copy as the next segment. `weft tui DIR`'s first frame
//! (in the first round) shows the same `syscalls` row as before, a
//! headline naming the damage, or weft exits with a clear error. With
//! `--skip-damaged`, a
//! count either fails clearly or is the count before less exactly the
//! records said to be left out.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use weft_tests::{SYSCALL_PROBE, capture_dir, needs, record, weft_bin};

use crate::tui::{Tmux, row};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// The reading commands, after `weft` (DIR is put in at `{}`; a command
/// with `{out}` writes a file there, whose bytes are its answer, or a
/// capture, whose answer is a query of it).
const COMMANDS: &[&[&str]] = &[
    &["export", "--format", "csv", "-o", "{out}", "{}"],
    &["extract", "--trigger", "1", "-o", "{out}", "{}"],
    &["info", "--json", "{}"],
    &["query", "--json", "{}", "syscalls | count"],
    &[
        "query",
        "--json",
        "{}",
        "syscalls | count, p50(dur), p99(dur), max(dur) by name",
    ],
    &[
        "query",
        "--json",
        "{}",
        r#"syscalls where name = "getppid" | p99.99(dur)"#,
    ],
    &[
        "query",
        "--json",
        "{}",
        "syscalls | sort dur desc | limit 5",
    ],
    &["query", "--json", "{}", "sched | count, sum(off_cpu)"],
    // A one-liner over the trigger's window (`weft trace --from`).
    &[
        "trace",
        "--from",
        "{}",
        "--trigger",
        "1",
        "-e",
        "tracepoint:syscalls:sys_exit_nanosleep { @n = count(); @r = sum(args->ret); } \
         tracepoint:raw_syscalls:sys_exit /args->id == 110/ { @g = count(); }",
    ],
];

/// What a command printed and how it ended.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `weft ARGS` with DIR for `{}`; fails the test if it takes more
/// than 30 s (a hang).
fn run(args: &[&str], dir: &Path) -> Outcome {
    let out = dir.with_extension("out");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&out);
    let (dir, out_arg) = (
        dir.to_str().expect("utf-8 path"),
        out.to_str().expect("utf-8 path"),
    );
    let args: Vec<&str> = args
        .iter()
        .map(|a| match *a {
            "{}" => dir,
            "{out}" => out_arg,
            a => a,
        })
        .collect();
    let mut child = Command::new(weft_bin())
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft");
    let start = Instant::now();
    while child.try_wait().expect("wait for weft").is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("weft {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("weft's output");
    let mut stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if out.is_dir() {
        let query = [
            "query",
            "--json",
            out_arg,
            "syscalls | count, sum(dur) by name",
        ];
        let answer = Command::new(weft_bin())
            .args(query)
            .output()
            .expect("query the extract");
        assert!(answer.status.success(), "{query:?} of an extract failed");
        stdout.push_str(&String::from_utf8_lossy(&answer.stdout));
        let _ = std::fs::remove_dir_all(&out);
    } else if let Ok(written) = std::fs::read(&out) {
        stdout.push_str(&String::from_utf8_lossy(&written));
        let _ = std::fs::remove_file(&out);
    }
    Outcome {
        code: output.status.code(),
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A small deterministic generator (the faults must repeat run to run).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.0 >> 33) % n.max(1)
    }
}

/// Whether `file` is a record segment (`records-N.log`).
fn is_segment(file: &Path) -> bool {
    (file.file_name()).is_some_and(|name| name.to_string_lossy().starts_with("records-"))
}

/// Faults every file gets; record segments get two more.
const FAULTS: usize = 5;
const SEGMENT_FAULTS: usize = 7;

/// Applies fault number `fault` to one file; returns what it did.
fn apply(fault: usize, path: &Path, rng: &mut Rng) -> String {
    let mut bytes = std::fs::read(path).expect("read the file");
    let len = bytes.len() as u64;
    let what = match fault {
        5 => {
            // A segment copied in as the next one.
            let name = path.file_name().expect("a name").to_string_lossy();
            let number: u64 = name
                .trim_start_matches("records-")
                .trim_end_matches(".log")
                .parse()
                .expect("a segment number");
            let copy = path.with_file_name(format!("records-{:010}.log", number + 1));
            std::fs::copy(path, &copy).expect("copy the segment");
            return format!("copied to {}", copy.display());
        }
        6 => {
            // Cut at a block boundary (16-byte header, 256 KiB blocks).
            let blocks = (len.saturating_sub(16)) / (256 << 10);
            let at = 16 + rng.below(blocks) * (256 << 10);
            bytes.truncate(at as usize);
            format!("cut at block boundary {at}")
        }
        0 => {
            for _ in 0..4 {
                let at = rng.below(len) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            "4 bits flipped".to_owned()
        }
        1 => {
            let at = rng.below(len);
            bytes.truncate(at as usize);
            format!("cut at {at}")
        }
        2 => {
            let page = rng.below(len.div_ceil(4096)) as usize * 4096;
            let end = (page + 4096).min(bytes.len());
            bytes[page..end].fill(0);
            format!("page at {page} zeroed")
        }
        3 => {
            bytes.extend((0..100).map(|_| rng.below(256) as u8));
            "100 bytes appended".to_owned()
        }
        _ => {
            std::fs::remove_file(path).expect("remove the file");
            return "deleted".to_owned();
        }
    };
    std::fs::write(path, bytes).expect("write the file");
    what
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read the capture") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

#[test]
fn every_command_on_a_damaged_capture_answers_as_before_or_fails_clearly() {
    let test = "every_command_on_a_damaged_capture_answers_as_before_or_fails_clearly";
    if !needs(test, &SYSCALL_PROBE) {
        return;
    }
    let original = capture_dir("faults");
    record(
        WORKLOAD,
        &original,
        &["getppid:300000", "nanosleep:300:3"],
        &[
            "--sources",
            "syscalls,sched",
            "--trigger",
            r#"syscalls where name = "nanosleep" and dur > 100ms"#,
            "--keep",
            "-1s..+1s",
        ],
    );
    let before: Vec<String> = COMMANDS
        .iter()
        .map(|args| {
            let outcome = run(args, &original);
            assert_eq!(outcome.code, Some(0), "{args:?}: {}", outcome.stderr);
            outcome.stdout
        })
        .collect();
    let sources = sources(&original);
    let frame_before = Tmux::available(test).then(|| tui_first_frame(&original, "faults"));
    assert!(
        matches!(frame_before, None | Some(Frame::Row(_))),
        "{frame_before:?}"
    );
    eprintln!("{test}: the UI's first frame: {frame_before:?}");
    let total = (sources.iter())
        .map(|source| count(&skip_count(&original, source)).expect("a count"))
        .sum();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&original)
        .expect("read the capture")
        .map(|e| e.expect("an entry").path())
        .collect();
    files.sort();
    // Three rounds over every file and fault, each case on its own copy
    // with its own draws (seeded by its number, so runs repeat): two at a
    // time, as each case is a few dozen short weft runs.
    let cases: Vec<(usize, &PathBuf, usize)> = (files.iter().cycle().take(files.len() * 3))
        .enumerate()
        .flat_map(|(round, file)| {
            let faults = if is_segment(file) {
                SEGMENT_FAULTS
            } else {
                FAULTS
            };
            (0..faults).map(move |fault| (round, file, fault))
        })
        .collect();
    let numbered: Vec<(usize, &(usize, &PathBuf, usize))> = cases.iter().enumerate().collect();
    let outcomes = weft_tests::at_once(&numbered, 2, |&(case, &(round, file, fault))| {
        let name = file.file_name().expect("a name").to_string_lossy();
        let damaged = capture_dir(&format!("faults-damaged-{case}"));
        copy_dir(&original, &damaged);
        let mut rng = Rng(0x5eed ^ (case as u64) << 16);
        let what = apply(fault, &damaged.join(&*name), &mut rng);
        let case_name = format!("{name}, {what}");
        let noticed = same_answers(&damaged, &original, &before, &case_name);
        // What a command noticed, check reports.
        if noticed > 0 && name != "weft.json" {
            let check = run(&["check", "{}"], &damaged);
            assert_ne!(check.code, Some(0), "{case_name}: check found nothing");
        }
        skipping(&damaged, &sources, total, &case_name);
        // The UI's first frame, in the first round (a second each).
        let frame = match (&frame_before, round < files.len()) {
            (Some(before), true) => {
                same_first_frame(before, &damaged, &format!("faults-{case}"), &case_name);
                1
            }
            _ => 0,
        };
        (noticed, frame)
    });
    let failed: usize = outcomes.iter().map(|(noticed, _)| noticed).sum();
    let frames: usize = outcomes.iter().map(|(_, frame)| frame).sum();
    eprintln!(
        "{test}: {} files x {FAULTS}-{SEGMENT_FAULTS} faults x 3 rounds x {} commands, \
         {failed} clear errors; {frames} first frames of the UI",
        files.len(),
        COMMANDS.len()
    );
}

/// `weft query --json --skip-damaged DIR "SOURCE | count"`.
fn skip_count(dir: &Path, source: &str) -> Outcome {
    let query = format!("{source} | count");
    run(&["query", "--json", "--skip-damaged", "{}", &query], dir)
}

/// The count in a `{"count":N}` answer.
fn count(outcome: &Outcome) -> Option<u64> {
    let row: serde_json::Value = serde_json::from_str(outcome.stdout.trim()).ok()?;
    row["count"].as_u64()
}

/// The capture's sources (from `weft info --json`).
fn sources(dir: &Path) -> Vec<String> {
    let info: serde_json::Value =
        serde_json::from_str(&run(&["info", "--json", "{}"], dir).stdout).expect("info's JSON");
    info["sources"]
        .as_array()
        .expect("a list of sources")
        .iter()
        .map(|s| s["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// `--skip-damaged` on a damaged capture of `total` records (all its
/// `sources`): a clear error, or counts whose sum is the total less
/// exactly the records its notice says it left out (at most that many
/// when some chunks' counts are lost).
fn skipping(dir: &Path, sources: &[String], total: u64, case: &str) {
    let mut counted = 0;
    let mut notice = String::new();
    for source in sources {
        let outcome = skip_count(dir, source);
        let case = format!("{case}: --skip-damaged {source} | count");
        if outcome.code != Some(0) {
            assert!(
                outcome.code.is_some() && outcome.stderr.starts_with("weft: "),
                "{case}: no clear error: {}",
                outcome.stderr
            );
            return;
        }
        counted += count(&outcome).unwrap_or_else(|| panic!("{case}: {}", outcome.stdout));
        notice = outcome.stderr;
    }
    let case = format!("{case}: --skip-damaged: {notice}");
    let Some(left_out) = notice.split("left out ").nth(1) else {
        assert_eq!(counted, total, "{case}: a different count, nothing said");
        return;
    };
    // "left out K chunk(s) (N records[ and M chunks whose count is lost]) at ..."
    let records: u64 = left_out
        .split(" (")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{case}"));
    if left_out.contains("count is lost") {
        assert!(counted + records <= total, "{case}");
    } else {
        assert_eq!(counted + records, total, "{case}");
    }
}

/// What `weft tui DIR` first shows of a capture.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// The overview's `syscalls` row once its headline is filled.
    Row(String),
    /// weft exited before drawing it: the window's text.
    Failed(String),
}

/// Opens `weft tui DIR` in a wide tmux window until the overview's
/// `syscalls` row has its headline (then quits), or weft exits.
fn tui_first_frame(dir: &Path, session: &str) -> Frame {
    let command = format!("{} tui {}", weft_bin().display(), dir.display());
    let tmux = Tmux::start_sized(session, &command, (240, 30));
    let filled = |s: &str| row(s, "syscalls").is_some_and(|r| r.len() > 5);
    let screen = tmux.wait_for("the first frame or an exit", |s| {
        s.contains("weft-exit=") || filled(s)
    });
    if screen.contains("weft-exit=") {
        return Frame::Failed(screen);
    }
    tmux.keys(&["q"]);
    let line = screen.lines().find(|l| row(l, "syscalls").is_some());
    Frame::Row(line.unwrap_or_default().to_owned())
}

/// `weft tui DIR`'s first frame of the damaged capture at `dir`: the one
/// `before` it, a clear error, or a row whose headline names the damage.
fn same_first_frame(before: &Frame, dir: &Path, session: &str, case: &str) {
    match tui_first_frame(dir, session) {
        Frame::Failed(screen) => assert!(
            screen.contains("weft: ") && !screen.contains("weft-exit=0"),
            "{case}: weft tui: no clear error:\n{screen}"
        ),
        Frame::Row(row) if &Frame::Row(row.clone()) != before => assert!(
            ["offset", "damaged", "missing", "checksum"]
                .iter()
                .any(|w| row.contains(w)),
            "{case}: weft tui: a different first frame, no damage named: {row} ({before:?})"
        ),
        Frame::Row(_) => {}
    }
}

/// Runs every command of the table on the `damaged` copy of `original`:
/// each answers as `before` or fails clearly. Returns how many failed.
fn same_answers(damaged: &Path, original: &Path, before: &[String], case: &str) -> usize {
    let mut noticed = 0;
    for (args, before) in COMMANDS.iter().zip(before) {
        let outcome = run(args, damaged);
        let case = format!("{case}: weft {args:?}");
        assert!(
            !outcome.stderr.contains("panicked") && outcome.code != Some(101),
            "{case} panicked: {}",
            outcome.stderr
        );
        // `info` names the directory.
        let stdout = outcome.stdout.replace(
            damaged.to_str().expect("utf-8 path"),
            original.to_str().expect("utf-8 path"),
        );
        match outcome.code {
            Some(0) => assert_eq!(&stdout, before, "{case}: a different answer"),
            Some(_) => {
                assert!(
                    outcome.stderr.starts_with("weft: "),
                    "{case}: no clear error: {}",
                    outcome.stderr
                );
                noticed += 1;
            }
            None => panic!("{case}: killed by a signal"),
        }
    }
    noticed
}
