//! End to end on programs written here: functions assembled with iced-x86
//! at known addresses, a path through them chosen by the test (which way
//! each conditional branch went), the PT a CPU would record for that path
//! (`weft_pt::encode::Recorder`), then the decoder must give back exactly
//! that path, and the call tree the test expects.

use iced_x86::code_asm::{CodeAssembler, CodeLabel, ecx, ptr, rax};
use iced_x86::{BlockEncoderOptions, Decoder, DecoderOptions, FlowControl};
use weft_pt::Errata;
use weft_pt::calls::{Call, Calls, Profile};
use weft_pt::encode::Recorder;
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::image::Image;

const BASE: u64 = 0x40_1000;
/// The TSC when the trace starts.
const START: u64 = 1000;

/// The program and the addresses of its functions.
struct Program {
    image: Image,
    main: u64,
    f: u64,
    g: u64,
    /// The `ret` that leaves `main`.
    main_ret: u64,
}

/// main calls f three times in a loop, then g through a register; g calls
/// f. f branches on ecx, so each of its calls takes its own way.
fn program() -> Program {
    let mut a = CodeAssembler::new(64).unwrap();
    let [mut main, mut top, mut f, mut g, mut skip, mut main_ret] =
        std::array::from_fn(|_| a.create_label());
    a.set_label(&mut main).unwrap();
    a.mov(ecx, 3).unwrap();
    a.set_label(&mut top).unwrap();
    a.call(f).unwrap();
    a.dec(ecx).unwrap();
    a.jnz(top).unwrap();
    a.lea(rax, ptr(g)).unwrap();
    a.call(rax).unwrap();
    a.set_label(&mut main_ret).unwrap();
    a.ret().unwrap();
    a.set_label(&mut f).unwrap();
    a.test(ecx, 1).unwrap();
    a.jz(skip).unwrap();
    a.nop().unwrap();
    a.set_label(&mut skip).unwrap();
    a.ret().unwrap();
    a.set_label(&mut g).unwrap();
    a.call(f).unwrap();
    a.ret().unwrap();
    let out = a
        .assemble_options(BASE, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .unwrap();
    let at = |label: &CodeLabel| out.label_ip(label).unwrap();
    let mut image = Image::new();
    image.add(BASE, out.inner.code_buffer.clone());
    image.add_symbol(at(&main), at(&f) - at(&main), "main");
    image.add_symbol(at(&f), at(&g) - at(&f), "f");
    image.add_symbol(at(&g), 0, "g");
    Program {
        main: at(&main),
        f: at(&f),
        g: at(&g),
        main_ret: at(&main_ret),
        image,
    }
}

/// The instructions that run from `start` when conditional branches go as
/// `taken` says, up to the `ret` that leaves the first function.
fn path(image: &Image, start: u64, taken: &[bool]) -> Vec<u64> {
    let (mut ip, mut taken, mut stack, mut path) = (start, taken.iter(), Vec::new(), Vec::new());
    loop {
        path.push(ip);
        let bytes = image.bytes_at(ip).unwrap();
        let instr = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode();
        ip = match instr.flow_control() {
            FlowControl::ConditionalBranch if *taken.next().unwrap() => instr.near_branch_target(),
            FlowControl::Next | FlowControl::ConditionalBranch => instr.next_ip(),
            FlowControl::Call => {
                stack.push(instr.next_ip());
                instr.near_branch_target()
            }
            // The only indirect call: `call rax` to g.
            FlowControl::IndirectCall => {
                stack.push(instr.next_ip());
                image_symbol(image, "g")
            }
            FlowControl::Return => match stack.pop() {
                Some(ret) => ret,
                None => return path,
            },
            other => panic!("{ip:#x}: {other:?} not in the test program"),
        };
    }
}

fn image_symbol(image: &Image, name: &str) -> u64 {
    (BASE..BASE + 0x100)
        .find(|&ip| image.symbol(ip) == Some((name, 0)))
        .unwrap()
}

/// In order: f with ecx = 3 (odd: jz not taken), jnz back; ecx = 2 (jz
/// taken), jnz back; ecx = 1 (not taken), jnz out; f from g with ecx = 0
/// (taken).
const TAKEN: [bool; 7] = [false, true, true, true, false, false, true];

/// The calls of the path `TAKEN` chooses; main's entry is before the trace.
const TREE: [&str; 11] = [
    "  f {",
    "  } f",
    "  f {",
    "  } f",
    "  f {",
    "  } f",
    "  g {",
    "    f {",
    "    } f",
    "  } g",
    "} main (entry not traced)",
];

/// Record `path`, calling `extra` before each step so a test can add time
/// or an overflow; the trace ends with tracing disabled after the last
/// instruction (the `ret` that leaves main, whose return goes untraced).
fn record(
    image: &Image,
    path: &[u64],
    mut extra: impl FnMut(&mut Recorder, usize, u64),
) -> Vec<u8> {
    let mut cpu = Recorder::new(image, path[0], START);
    for (i, pair) in path.windows(2).enumerate() {
        extra(&mut cpu, i, pair[0]);
        cpu.step(pair[0], pair[1]).unwrap();
    }
    cpu.disable(None);
    cpu.finish()
}

fn decode(image: &Image, trace: &[u8]) -> Vec<Step> {
    let mut steps = Vec::new();
    Flow::new(trace, image, Errata::default()).run(&mut |step| steps.push(step));
    steps
}

fn ips(steps: &[Step]) -> Vec<u64> {
    steps
        .iter()
        .filter_map(|step| match step {
            Step::Insn { ip, .. } => Some(*ip),
            Step::Event(_, _) | Step::Sideband(_) => None,
        })
        .collect()
}

fn tree(image: &Image, steps: &[Step]) -> Vec<String> {
    let mut calls = Calls::new(image);
    let mut lines = Vec::new();
    for step in steps {
        calls.step(step, &mut |call| {
            lines.push(match call {
                Call::Entry {
                    depth, function, ..
                } => {
                    format!(
                        "{}{} {{",
                        "  ".repeat(depth),
                        weft_pt::calls::name(image, function)
                    )
                }
                Call::Exit {
                    depth,
                    function,
                    duration,
                    ..
                } => format!(
                    "{}}} {}{}",
                    "  ".repeat(depth),
                    weft_pt::calls::name(image, function),
                    if duration.is_some() {
                        ""
                    } else {
                        " (entry not traced)"
                    }
                ),
                Call::Note { event, .. } => format!("[{event}]"),
            });
        });
    }
    lines
}

#[test]
fn the_decoded_path_and_call_tree_are_the_ones_that_ran() {
    let program = program();
    let path = path(&program.image, program.main, &TAKEN);
    assert_eq!(path.len(), 29, "{path:x?}");
    assert_eq!(*path.last().unwrap(), program.main_ret);
    let trace = record(&program.image, &path, |_, _, _| {});
    let steps = decode(&program.image, &trace);
    // The main ret is the last instruction traced: tracing stops at it.
    assert_eq!(ips(&steps), path);
    assert!(
        matches!(
            steps.last(),
            Some(Step::Event(Event::Disabled { at: None, ip: None }, _))
        ),
        "{steps:?}"
    );
    assert_eq!(tree(&program.image, &steps), TREE);
    // Returns compress into TNT bits; only the indirect call needs an
    // address (2 bytes against the last IP): PSB+ 28 bytes, TIP.PGE 5,
    // two TNTs (6 and 3 outcomes), the TIP of 3, a TNT and the TIP.PGD.
    assert_eq!(trace.len(), 28 + 5 + 2 + 3 + 1 + 1, "{trace:x?}");
}

#[test]
fn durations_come_from_the_time_packets_around_each_call() {
    let program = program();
    let path = path(&program.image, program.main, &TAKEN);
    // A TSC 100 ticks later as each function is entered.
    let mut tsc = START;
    let trace = record(&program.image, &path, |cpu, _, ip| {
        if [program.f, program.g].contains(&ip) {
            tsc += 100;
            cpu.tsc(tsc);
        }
    });
    let steps = decode(&program.image, &trace);
    assert_eq!(ips(&steps), path);
    let mut calls = Calls::new(&program.image);
    let mut profile = Profile::default();
    let mut exits = Vec::new();
    for step in &steps {
        calls.step(step, &mut |call| {
            profile.add(&call);
            if let Call::Exit {
                function,
                duration: Some(d),
                ..
            } = call
            {
                exits.push((weft_pt::calls::name(&program.image, function), d));
            }
        });
    }
    // Time moves as the walk reaches the packet after the timing packets:
    // here the TNT of each f's branch and return, read at f's first
    // branch. Each call of f from main spans one TSC step; g's TSC and its
    // f's come before the same TNT, so both last 200.
    let name = |s: &str| s.to_string();
    assert_eq!(
        exits,
        [
            (name("f"), 100),
            (name("f"), 100),
            (name("f"), 100),
            (name("f"), 200),
            (name("g"), 200)
        ]
    );
    let costs: Vec<(String, u64, u64, u64)> = profile
        .by_own_time()
        .into_iter()
        .map(|(f, c)| {
            (
                weft_pt::calls::name(&program.image, f),
                c.calls,
                c.total,
                c.own,
            )
        })
        .collect();
    assert_eq!(costs, [(name("f"), 4, 500, 500), (name("g"), 1, 200, 0)]);
}

#[test]
fn after_an_overflow_the_path_resumes_where_the_fup_says_and_the_stack_starts_again() {
    let program = program();
    let path = path(&program.image, program.main, &TAKEN);
    // Overflow just before the second call of f's first instruction.
    let lost_at = path
        .iter()
        .enumerate()
        .filter(|&(_, &ip)| ip == program.f)
        .nth(1)
        .unwrap()
        .0;
    let trace = record(&program.image, &path, |cpu, i, ip| {
        if i == lost_at {
            cpu.overflow(ip);
        }
    });
    let steps = decode(&program.image, &trace);
    let overflow = steps
        .iter()
        .position(|s| matches!(s, Step::Event(Event::Overflow { .. }, _)))
        .unwrap();
    // The `call f` ran after the last packet before the overflow: nothing
    // tells the decoder it did. From the FUP on, the path is whole again.
    assert_eq!(ips(&steps[..overflow]), path[..lost_at - 1]);
    assert_eq!(ips(&steps[overflow..]), path[lost_at..]);
    // The f that was running resumes as a root; main's second call of f
    // and everything after it are whole.
    let mut want = vec!["  f {", "  } f", "[overflow]", "} f (entry not traced)"];
    want.extend(&TREE[4..]);
    assert_eq!(tree(&program.image, &steps), want);
}

#[test]
fn a_trace_cut_short_gives_a_prefix_of_the_path() {
    let program = program();
    let path = path(&program.image, program.main, &TAKEN);
    let trace = record(&program.image, &path, |_, _, _| {});
    for cut in 0..trace.len() {
        let steps = decode(&program.image, &trace[..cut]);
        let got = ips(&steps);
        assert_eq!(got, path[..got.len()], "cut at {cut}");
        // Cut before tracing was enabled, nothing ran that the trace says.
        assert!(
            steps.is_empty()
                || matches!(
                    steps.last(),
                    Some(Step::Event(
                        Event::EndOfTrace | Event::Error { .. } | Event::Disabled { .. },
                        _
                    ))
                ),
            "cut at {cut}: {:?}",
            steps.last()
        );
    }
}

#[test]
fn code_missing_from_the_image_stops_the_walk_with_its_address() {
    let program = program();
    let path = path(&program.image, program.main, &TAKEN);
    let trace = record(&program.image, &path, |_, _, _| {});
    // Only main's bytes: the walk follows the call into f and finds nothing.
    let mut partial = Image::new();
    let main_len = (program.f - program.main) as usize;
    partial.add(
        program.main,
        program.image.bytes_at(program.main).unwrap()[..main_len].to_vec(),
    );
    let steps = decode(&partial, &trace);
    assert_eq!(ips(&steps), path[..2]);
    assert!(
        matches!(
            *steps.last().unwrap(),
            Step::Event(Event::Error { ip, message: "no memory mapped at this address", .. }, _)
                if ip == program.f
        ),
        "{steps:?}"
    );
}

/// Runs a build tool the test needs (`cargo xtask setup` installs them).
fn build(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program} (setup installs it): {e}"));
    assert!(status.success(), "{program} {args:?}");
}

/// A fresh directory for one test's programs.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-pt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The call tree of a trace that runs the ELF file at `binary` from the
/// function `start` (as `finder` names it) to its return: the file is
/// mapped into an image named by `finder`, the path walked, recorded as PT
/// and decoded.
fn calls_from(binary: &str, finder: &weft_symbols::Finder, start: &str) -> Vec<String> {
    let bytes = std::fs::read(binary).unwrap();
    let elf = weft_symbols::Elf::parse(binary, &bytes).unwrap();
    let start = finder
        .functions(std::path::Path::new(binary), &elf)
        .into_iter()
        .find(|f| f.name == start)
        .unwrap_or_else(|| panic!("{start} is not named in {binary}"))
        .addr;
    let mut image = Image::with_finder(finder.clone());
    image.add_elf(binary, &bytes).unwrap();
    let path = path(&image, start, &[]);
    let steps = decode(&image, &record(&image, &path, |_, _, _| {}));
    assert_eq!(ips(&steps), path);
    tree(&image, &steps)
}

/// A C++ program built here with g++, stripped, its debug info split off
/// with a `.gnu_debuglink`, as distributions ship programs: its calls are
/// named from the debug file, demangled.
#[test]
fn calls_of_a_stripped_cpp_program_are_named_from_its_debug_file() {
    let dir = scratch("cpp");
    let source = dir.join("shop.cpp");
    std::fs::write(
        &source,
        r#"
namespace shop {
struct Cart {
    int total(int n) const;
};
__attribute__((noinline)) int Cart::total(int n) const { return n * 3; }
}
extern "C" __attribute__((noinline)) int weft_exported(int n) { return n + 1; }
int main(int argc, char **) {
    shop::Cart cart;
    return cart.total(argc) + weft_exported(argc);
}
"#,
    )
    .unwrap();
    let (binary, debug) = (dir.join("shop"), dir.join("shop.debug"));
    let (binary, debug) = (binary.to_str().unwrap(), debug.to_str().unwrap());
    build(
        "g++",
        &["-O1", "-g", "-o", binary, source.to_str().unwrap()],
    );
    build("objcopy", &["--only-keep-debug", binary, debug]);
    build("strip", &["--strip-all", binary]);
    build(
        "objcopy",
        &[&format!("--add-gnu-debuglink={debug}"), binary],
    );
    assert_eq!(
        calls_from(binary, &weft_symbols::Finder::default(), "main"),
        [
            "  shop::Cart::total(int) const {",
            "  } shop::Cart::total(int) const",
            "  weft_exported {",
            "  } weft_exported",
            "} main (entry not traced)",
        ]
    );
    let no_demangle = weft_symbols::Finder::new(Vec::new(), false);
    assert_eq!(
        calls_from(binary, &no_demangle, "main")[0],
        "  _ZNK4shop4Cart5totalEi {"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Rust program, stripped, its debug file only under a debug directory's
/// build-id layout (`--debug-dir`): its calls are named from there, as
/// Rust paths without their hashes.
#[test]
fn calls_of_a_stripped_rust_program_are_named_from_a_build_id_debug_dir() {
    let dir = scratch("rust");
    let source = dir.join("shop.rs");
    std::fs::write(
        &source,
        r"
pub mod shop {
    #[inline(never)]
    pub fn total(n: u64) -> u64 { n.wrapping_mul(3) }
    #[inline(never)]
    pub fn checkout(n: u64) -> u64 { total(n).wrapping_add(total(n + 1)) }
}
fn main() { std::process::exit(shop::checkout(std::env::args().count() as u64) as i32); }
",
    )
    .unwrap();
    let binary = dir.join("shop");
    let binary = binary.to_str().unwrap();
    let source = source.to_str().unwrap();
    build(
        "rustc",
        &[
            "-O",
            "-g",
            "-C",
            "link-arg=-Wl,--build-id",
            "-o",
            binary,
            source,
        ],
    );
    let id = weft_pt::image::build_id(binary, &std::fs::read(binary).unwrap())
        .unwrap()
        .expect("linked with --build-id");
    let debug_dir = dir.join("debug");
    let debug = debug_dir.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    build(
        "objcopy",
        &["--only-keep-debug", binary, debug.to_str().unwrap()],
    );
    build("strip", &["--strip-all", binary]);
    let finder = weft_symbols::Finder::new(vec![debug_dir], true);
    assert_eq!(
        calls_from(binary, &finder, "shop::shop::checkout"),
        [
            "  shop::shop::total {",
            "  } shop::shop::total",
            "  shop::shop::total {",
            "  } shop::shop::total",
            "} shop::shop::checkout (entry not traced)",
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
