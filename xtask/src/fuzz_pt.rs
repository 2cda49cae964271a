//! `cargo xtask fuzz-pt`: the PT flow decoder against a model, for a time
//! budget. Each round writes a random small program (nops, conditional
//! and direct jumps forward and back, direct and indirect calls, indirect
//! jumps, returns), picks a random path through it (each conditional
//! branch goes a random way), and records the PT a CPU would send for that
//! path, with PSBs and overflows at random places. The path is the model:
//! weft must decode exactly its instructions, and so must libipt (Debian's
//! `libipt-dev`, through `bench/libipt.c`) wherever it decodes the trace
//! without an error. A failing round is kept in `target/fuzz-pt/`.

use std::{path::Path, process::Command, time::Instant};

use anyhow::{Context as _, Result, bail};
use weft_pt::{
    Errata,
    encode::Recorder,
    flow::{Flow, Step},
    image::Image,
};

use crate::{
    bench_pt::libipt_harness,
    exec::{output, workspace_root},
};

#[derive(clap::Args)]
pub struct Options {
    /// How long to fuzz.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Start from this seed (printed by every run) to repeat it.
    #[arg(long)]
    seed: Option<u64>,
}

/// Where programs are loaded.
const ORG: u64 = 0x40_0000;
/// Instructions a path runs at most before it heads for its end.
const STEPS: usize = 2_000;

/// A run of `seconds` from a fresh seed (`cargo xtask test` gives it 60).
pub fn for_seconds(seconds: u64) -> Result<()> {
    run(&Options {
        seconds,
        seed: None,
    })
}

pub fn run(options: &Options) -> Result<()> {
    let harness = libipt_harness()?;
    let dir = workspace_root().join("target/fuzz-pt");
    std::fs::create_dir_all(&dir)?;
    let seed = options.seed.unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64) | 1
    });
    println!("fuzz-pt: {} s from seed {seed}", options.seconds);
    let mut rng = Rng(seed);
    let start = Instant::now();
    let (mut rounds, mut instructions, mut libipt_errors) = (0u64, 0u64, 0u64);
    while start.elapsed().as_secs() < options.seconds {
        let round_seed = rng.next();
        let case = Case::new(&mut Rng(round_seed));
        let weft = weft_ips(&case);
        let libipt = libipt_ips(&harness, &dir, &case)?;
        if weft != case.path {
            keep(&dir, &case)?;
            bail!(
                "round {rounds} (seed {round_seed}): weft decoded {} instructions where {} ran, first \
                 difference at {}; the case is in {}",
                weft.len(),
                case.path.len(),
                first_difference(&weft, &case.path),
                dir.display()
            );
        }
        // libipt gives up at an error and resyncs at the next PSB: what it
        // decoded before must be the path's.
        let decoded = libipt.iter().take_while(|ip| ip.is_some()).flatten();
        if !decoded.zip(&case.path).all(|(a, b)| a == b) {
            keep(&dir, &case)?;
            bail!(
                "round {rounds} (seed {round_seed}): libipt decoded another path; the case is in {}",
                dir.display()
            );
        }
        libipt_errors += u64::from(libipt.contains(&None));
        instructions += case.path.len() as u64;
        rounds += 1;
    }
    println!(
        "fuzz-pt: {rounds} programs, {instructions} instructions, all decoded as they ran by weft; \
         libipt agreed on every one it decoded ({libipt_errors} it stopped on with an error)"
    );
    Ok(())
}

/// A program, its trace, and the path it took as far as the trace tells.
struct Case {
    code: Vec<u8>,
    path: Vec<u64>,
    trace: Vec<u8>,
}

impl Case {
    fn new(rng: &mut Rng) -> Self {
        let code = program(rng);
        let mut image = Image::new();
        image.add(ORG, code.clone());
        let ran = path(&code, rng);
        let (trace, path) = record(&image, &code, &ran, rng);
        Case { code, path, trace }
    }
}

/// One instruction of the generator, by what it does to the flow.
#[derive(Clone, Copy)]
enum Op {
    Nop,
    /// `jz` to the op this many ops away (back when negative).
    Jcc(isize),
    Jmp(isize),
    /// `call` the function with this index.
    Call(usize),
    /// `lea rax, [function]; call rax`.
    CallRax(usize),
    /// `lea rax, [op]; jmp rax` to the op this many ops ahead.
    JmpRax(usize),
    Ret,
}

impl Op {
    fn len(self) -> usize {
        match self {
            Op::Nop | Op::Ret => 1,
            Op::Jcc(_) | Op::Jmp(_) => 2,
            Op::Call(_) => 5,
            Op::CallRax(_) | Op::JmpRax(_) => 9,
        }
    }
}

/// Two to six functions of up to 24 ops each, every one ending in `ret`;
/// calls only go to later functions, so the call depth is bounded.
fn program(rng: &mut Rng) -> Vec<u8> {
    let functions = 2 + rng.below(5);
    let mut ops: Vec<Vec<Op>> = Vec::new();
    for f in 0..functions {
        let n = 2 + rng.below(23);
        let later = functions - f - 1;
        let mut body: Vec<Op> = (0..n - 1)
            .map(|i| {
                let reach = |rng: &mut Rng| {
                    let span = 1 + rng.below(8);
                    if rng.below(3) == 0 && i >= span {
                        -small(span)
                    } else {
                        small(span.min(n - 1 - i))
                    }
                };
                match rng.below(10) {
                    3 | 4 => Op::Jcc(reach(rng)),
                    5 => Op::Jmp(reach(rng).max(1)),
                    6 if later > 0 => Op::Call(f + 1 + rng.below(later)),
                    7 if later > 0 => Op::CallRax(f + 1 + rng.below(later)),
                    8 => Op::JmpRax(1 + rng.below(n - 1 - i)),
                    9 => Op::Ret,
                    _ => Op::Nop,
                }
            })
            .collect();
        body.push(Op::Ret);
        ops.push(body);
    }
    assemble(&ops)
}

/// Machine code for `ops`, the functions one after another from [`ORG`].
fn assemble(ops: &[Vec<Op>]) -> Vec<u8> {
    // Where each op starts, then the bytes.
    let mut at = Vec::new();
    let mut pc = ORG;
    for body in ops {
        let mut starts = Vec::new();
        for op in body {
            starts.push(pc);
            pc += op.len() as u64;
        }
        at.push(starts);
    }
    let mut code = Vec::new();
    for (f, body) in ops.iter().enumerate() {
        for (i, op) in body.iter().enumerate() {
            let here = at[f][i];
            let next = here + op.len() as u64;
            let op_at = |k: isize| at[f][i.checked_add_signed(k).expect("inside the function")];
            let rel = |to: u64, end: u64| to.wrapping_sub(end).cast_signed();
            let rel8 = |to, end| {
                i8::try_from(rel(to, end))
                    .expect("a short jump")
                    .cast_unsigned()
            };
            let rel32 = |to, end| {
                i32::try_from(rel(to, end))
                    .expect("a near jump")
                    .to_le_bytes()
            };
            match *op {
                Op::Nop => code.push(0x90),
                Op::Ret => code.push(0xc3),
                Op::Jcc(k) => code.extend([0x74, rel8(op_at(k), next)]),
                Op::Jmp(k) => code.extend([0xeb, rel8(op_at(k), next)]),
                Op::Call(g) => {
                    code.push(0xe8);
                    code.extend(rel32(at[g][0], next));
                }
                Op::CallRax(g) | Op::JmpRax(g) => {
                    let (to, last) = match *op {
                        Op::CallRax(_) => (at[g][0], 0xd0),
                        _ => (op_at(small(g)), 0xe0),
                    };
                    // lea rax, [rip + disp32]; call/jmp rax
                    code.extend([0x48, 0x8d, 0x05]);
                    code.extend(rel32(to, here + 7));
                    code.extend([0xff, last]);
                }
            }
        }
    }
    code
}

/// A path from the first function's start: conditional branches go a
/// random way; after [`STEPS`] instructions every one falls through, so
/// the path returns from the first function and ends there.
fn path(code: &[u8], rng: &mut Rng) -> Vec<u64> {
    let (mut ip, mut stack, mut path, mut rax) = (ORG, Vec::new(), Vec::new(), 0u64);
    loop {
        path.push(ip);
        let at = (ip - ORG) as usize;
        let byte = |k: usize| code[at + k];
        let rel8 = |next: u64| next.wrapping_add_signed(i64::from(byte(1).cast_signed()));
        let late = path.len() > STEPS;
        ip = match byte(0) {
            0x90 => ip + 1,
            0x74 if late || rng.below(2) == 0 => ip + 2,
            0x74 | 0xeb if !late || rel8(ip + 2) > ip => rel8(ip + 2),
            0xeb => ip + 2,
            0xe8 => {
                stack.push(ip + 5);
                let rel = i32::from_le_bytes(code[at + 1..at + 5].try_into().expect("4 bytes"));
                (ip + 5).wrapping_add_signed(i64::from(rel))
            }
            0x48 => {
                let rel = i32::from_le_bytes(code[at + 3..at + 7].try_into().expect("4 bytes"));
                rax = (ip + 7).wrapping_add_signed(i64::from(rel));
                ip + 7
            }
            0xff if byte(1) == 0xd0 => {
                stack.push(ip + 2);
                rax
            }
            0xff => rax,
            _ => match stack.pop() {
                Some(back) => back,
                None => return path,
            },
        };
    }
}

/// The PT for `path`, tracing stopped at its last return, with PSBs and
/// overflows between random instructions; and what a decoder can know of
/// the path from it. An overflow loses what ran since the last instruction
/// whose outcome a packet holds, or the last PSB's FUP (branches that need
/// no packet, NOPs): the decoder stops there and resumes where the
/// overflow's FUP says.
fn record(image: &Image, code: &[u8], path: &[u64], rng: &mut Rng) -> (Vec<u8>, Vec<u64>) {
    let mut cpu = Recorder::new(image, path[0], 0);
    let mut known = vec![path[0]];
    // Where `known` ends with the last instruction a packet speaks for.
    let mut spoken = 0;
    for pair in path.windows(2) {
        cpu.step(pair[0], pair[1]).expect("the path can run");
        if needs_packet(code, pair[0]) {
            spoken = known.len();
        }
        match rng.below(200) {
            0 => {
                // Its FUP says the path reached the next instruction.
                cpu.psb(pair[1]);
                spoken = known.len();
            }
            1 => {
                cpu.overflow(pair[1]);
                known.truncate(spoken);
            }
            _ => {}
        }
        known.push(pair[1]);
    }
    cpu.disable(None);
    (cpu.finish(), known)
}

/// Whether the instruction at `ip` needs a packet to say where it went:
/// conditional branches, indirect calls and jumps, returns.
fn needs_packet(code: &[u8], ip: u64) -> bool {
    matches!(code[(ip - ORG) as usize], 0x74 | 0xff | 0xc3)
}

/// What weft decodes: the instructions, in order.
fn weft_ips(case: &Case) -> Vec<u64> {
    let mut image = Image::new();
    image.add(ORG, case.code.clone());
    let mut ips = Vec::new();
    Flow::new(&case.trace, &image, Errata::default()).run(&mut |step| {
        if let Step::Insn { ip, .. } = step {
            ips.push(ip);
        }
    });
    ips
}

/// What libipt decodes: instructions, `None` where it stopped on an error.
fn libipt_ips(harness: &Path, dir: &Path, case: &Case) -> Result<Vec<Option<u64>>> {
    let (trace, code) = (dir.join("round.pt"), dir.join("round.bin"));
    std::fs::write(&trace, &case.trace)?;
    std::fs::write(&code, &case.code)?;
    let text = output(
        Command::new(harness)
            .arg("ips")
            .arg(&trace)
            .arg(&code)
            .arg(format!("{ORG:#x}")),
    )?;
    text.lines()
        .map(|line| match line {
            "error" => Ok(None),
            hex => u64::from_str_radix(hex, 16)
                .map(Some)
                .with_context(|| format!("libipt harness printed {line:?}")),
        })
        .collect()
}

/// Keeps a failing case: its trace, code and path.
fn keep(dir: &Path, case: &Case) -> Result<()> {
    std::fs::write(dir.join("failed.pt"), &case.trace)?;
    std::fs::write(dir.join("failed.bin"), &case.code)?;
    let path: Vec<String> = case.path.iter().map(|ip| format!("{ip:016x}")).collect();
    std::fs::write(dir.join("failed.path"), path.join("\n") + "\n")?;
    Ok(())
}

fn first_difference(got: &[u64], want: &[u64]) -> String {
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    let at = at.unwrap_or(got.len().min(want.len()));
    format!(
        "instruction {at}: got {:x?}, want {:x?}",
        got.get(at),
        want.get(at)
    )
}

/// A count as a signed offset.
fn small(n: usize) -> isize {
    isize::try_from(n).expect("a small count")
}

/// A xorshift generator: runs repeat from their printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
