//! A checked plan lowered into what the kernel's generic trace programs
//! read: one `ProbeConfig` per attach point (what to copy, filter, key,
//! aggregate and keep), in `weft-abi`'s layout. Pure: `weft-kernel` writes
//! the configurations into the programs' map and loads the programs with
//! the parts of their body [`uses`] names.

use weft_abi::oneliner::{
    ADDRESS_HOPS, AGG_LINEAR, AGG_LOG2, AGG_PLAIN, Aggregation, Chain, Filter, ITERATORS,
    LAST_TID_STARTS, LIVE, LIVE_ANY_THREAD, LIVE_IN_WEFT, MAX_FILTERS, MAX_FUNCTION_ARGS, MAX_HOPS,
    MAX_SAVES, OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT, OP_NE, Operand as KernelOperand, PATHS,
    PATHS_PER_PROBE, ProbeConfig, SKBS, STACK_KERNEL, STACK_USER, START_ADDRESS, START_CONTEXT,
    START_SAVED, START_TASK, START_TASK_ADDRESS, STARTS_STORE, STARTS_TAKE, STRING_CHAIN,
    STRING_DATA_LOC, STRING_MEMORY, STRING_PATH, STRING_POINTER, STRING_SAVED, SUBJECT_COMM,
    SUBJECT_CONST, SUBJECT_CPU, SUBJECT_ELAPSED, SUBJECT_FIELD, SUBJECT_FUNC, SUBJECT_PID,
    SUBJECT_PROBE, SUBJECT_TID, SUBJECT_UID, Starts, iterator_path_index, path_index,
};

use crate::{
    Attach, FieldKind, Plan, Target,
    ast::BinOp,
    check::{MapKind, Operand, Subject},
    plan::{KeptStart, KernelAgg, KeyPart, ReadKind, Sample, Start},
};

/// A plan larger than the kernel's configuration holds (the checker
/// bounds what it can; these are the counts it cannot see).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge(pub &'static str);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for TooLarge {}

/// The parts of the trace programs' body that the attach points of `plan`
/// run in the kernel need: the programs are loaded with only these.
pub fn uses(plan: &Plan, cpid: u32) -> Result<u32, TooLarge> {
    plan.attaches
        .iter()
        .enumerate()
        .filter(|(_, attach)| attach.in_kernel())
        .try_fold(0, |uses, (index, attach)| {
            Ok(uses | config(index, attach, cpid)?.uses())
        })
}

/// Which of weft's own events a probe on `target` keeps: none of its
/// own acts (its system calls and functions would trace its own output),
/// but those of tracepoints about other threads. A wakeup or a block
/// completion fires in whatever thread the CPU runs, weft's too, and
/// leaving those out lost the workload's events.
fn live(target: &Target) -> u8 {
    match target {
        Target::Begin | Target::End => LIVE_IN_WEFT,
        Target::Tracepoint { category, .. }
            if category != "syscalls" && category != "raw_syscalls" =>
        {
            LIVE_ANY_THREAD
        }
        Target::RawTracepoint { name } if name != "sys_enter" && name != "sys_exit" => {
            LIVE_ANY_THREAD
        }
        // Run in weft's own thread as it reads the iterator.
        Target::Iter { .. } => LIVE_ANY_THREAD,
        _ => LIVE,
    }
}

/// The kernel's configuration for attach point `index`; `cpid` is the
/// `-c` command's pid, which filters on `cpid` compare with.
pub fn config(index: usize, attach: &Attach, cpid: u32) -> Result<ProbeConfig, TooLarge> {
    let mut config = ProbeConfig {
        attach: u16::try_from(index).map_err(|_| TooLarge("too many attach points"))?,
        raw_len: attach.raw_len,
        strings: attach.slots() as u8,
        signal: attach.signal.unwrap_or(0),
        live: live(&attach.target),
        ..ProbeConfig::default()
    };
    for (i, field) in attach.strings.iter().enumerate() {
        config.string_kinds[i] = if field.kind == FieldKind::DataLoc {
            STRING_DATA_LOC
        } else {
            STRING_POINTER
        };
        config.string_offsets[i] = field.offset;
    }
    for (i, map) in attach.saved.iter().enumerate() {
        let i = attach.strings.len() + i;
        config.string_kinds[i] = STRING_SAVED;
        config.string_offsets[i] = kept_id(*map)?.into();
    }
    for (i, (field, map)) in attach.saves.iter().enumerate().take(MAX_SAVES) {
        config.saves[i] = kept_id(*map)?;
        config.save_offsets[i] = field.offset;
    }
    for (i, read) in attach.reads.iter().enumerate() {
        let i = attach.read_slot(i);
        config.string_kinds[i] = match read.kind {
            ReadKind::Bytes => STRING_MEMORY,
            ReadKind::String => STRING_CHAIN,
            ReadKind::Path => STRING_PATH,
        };
        config.chains[i] = chain(read)?;
    }
    if let Some(agg) = &attach.agg {
        config.agg = aggregation(agg)?;
    }
    if let Some(start) = &attach.start {
        config.starts = starts(start)?;
    }
    if let Some(field) = &attach.join {
        config.join = 1;
        config.join_offset = field.offset;
    }
    config.stacks =
        if attach.kstack { STACK_KERNEL } else { 0 } | if attach.ustack { STACK_USER } else { 0 };
    if let Some(comm) = &attach.comm {
        config.match_comm = 1;
        config.comm = weft_abi::comm_bytes(comm);
    }
    for (slot, filter) in config
        .filters
        .iter_mut()
        .zip(attach.filters.iter().take(MAX_FILTERS))
    {
        *slot = kernel_filter(filter, cpid);
    }
    Ok(config)
}

/// The copy each attach point of `plan` takes of the fentry or fexit
/// program (none for other targets): its rank among the attach points of
/// its kind, so that the loader knows it before attaching ([`paths`]).
pub fn function_copies(plan: &Plan) -> Vec<Option<usize>> {
    let mut taken = [0; 2];
    (plan.attaches.iter())
        .map(|attach| match attach.target {
            Target::Fentry { exit, .. } if attach.in_kernel() => {
                taken[usize::from(exit)] += 1;
                Some(taken[usize::from(exit)] - 1)
            }
            _ => None,
        })
        .collect()
}

/// The kernel's [`PATHS_GLOBAL`](weft_abi::oneliner::PATHS_GLOBAL): where
/// each fentry and fexit copy's and iterator's `path()`s find their
/// `struct path`.
pub fn paths(plan: &Plan) -> Result<[u32; PATHS], TooLarge> {
    let mut paths = [0; PATHS];
    let copies = function_copies(plan);
    for (attach, copy) in plan.attaches.iter().zip(copies) {
        let place = |j| match (&attach.target, copy) {
            (Target::Fentry { exit, .. }, Some(copy)) => Some(path_index(*exit, copy, j)),
            (Target::Iter { name }, _) => {
                let i = ITERATORS.iter().position(|n| n == name)?;
                Some(iterator_path_index(i, j))
            }
            _ => None,
        };
        let reads = attach.reads.iter().enumerate();
        let wanted = reads.filter(|(_, read)| read.kind == ReadKind::Path);
        for (j, (i, read)) in wanted.enumerate() {
            if j >= PATHS_PER_PROBE {
                return Err(TooLarge("a probe writes at most two paths"));
            }
            let Some(entry) = place(j).and_then(|index| paths.get_mut(index)) else {
                // Past the copies: attaching says so.
                continue;
            };
            let arg = read.hops[0] / 8;
            if read.start != Start::Context
                || read.hops.len() != 1
                || arg as usize >= MAX_FUNCTION_ARGS
            {
                return Err(TooLarge("path() of a pointer not a function's argument"));
            }
            let offset = u16::try_from(read.at)
                .map_err(|_| TooLarge("a struct path too far into its struct"))?;
            *entry = weft_abi::oneliner::path_spec(attach.read_slot(i) as u8, arg as u8, offset);
        }
    }
    Ok(paths)
}

/// The kernel's [`SKBS_GLOBAL`](weft_abi::oneliner::SKBS_GLOBAL): which
/// argument of each fentry and fexit copy `skboutput()` copies the packet
/// of.
pub fn skbs(plan: &Plan) -> [u32; SKBS] {
    let mut skbs = [0; SKBS];
    let copies = function_copies(plan);
    for (attach, copy) in plan.attaches.iter().zip(copies) {
        if let (Target::Fentry { exit, .. }, Some(copy), Some(skb)) =
            (&attach.target, copy, attach.skb)
            && let Some(entry) = skbs.get_mut(path_index(*exit, copy, 0) / PATHS_PER_PROBE)
        {
            *entry = weft_abi::oneliner::skb_spec(skb.arg, skb.len_at);
        }
    }
    skbs
}

/// The kernel's id of map `map`'s pointers kept per thread.
fn kept_id(map: usize) -> Result<u8, TooLarge> {
    u8::try_from(map + 1).map_err(|_| TooLarge("too many maps keep pointers"))
}

/// The kernel's form of a struct member read (the checker bounds it).
fn chain(read: &crate::plan::Read) -> Result<Chain, TooLarge> {
    let mut offsets = [0; MAX_HOPS];
    if read.hops.len() > MAX_HOPS {
        return Err(TooLarge("a member behind too many pointers"));
    }
    offsets[..read.hops.len()].copy_from_slice(&read.hops);
    let mut chain = Chain {
        start: match read.start {
            Start::Context => START_CONTEXT,
            Start::Task => START_TASK,
            Start::TaskAddress => START_TASK_ADDRESS,
            Start::Address(_) => START_ADDRESS,
            Start::Saved(_) => START_SAVED,
        },
        hops: read.hops.len() as u8,
        len: u16::try_from(read.len).map_err(|_| TooLarge("a member read too long"))?,
        at: read.at,
        offsets,
    };
    let address = match read.start {
        Start::Address(address) => address,
        Start::Saved(map) => kept_id(map)?.into(),
        _ => return Ok(chain),
    };
    if read.hops.len() > ADDRESS_HOPS {
        return Err(TooLarge(
            "the kernel follows at most two pointers from a fixed or saved address",
        ));
    }
    chain.set_address(address);
    Ok(chain)
}

fn kernel_filter(filter: &crate::check::Filter, cpid: u32) -> Filter {
    let op = match filter.op {
        BinOp::Eq => OP_EQ,
        BinOp::Ne => OP_NE,
        BinOp::Lt => OP_LT,
        BinOp::Le => OP_LE,
        BinOp::Gt => OP_GT,
        _ => OP_GE,
    };
    let Read {
        subject,
        offset,
        size,
        signed,
    } = read(filter.subject);
    Filter {
        subject,
        op,
        size,
        signed,
        offset,
        value: match filter.value {
            Operand::Int(n) => n,
            Operand::Cpid => i64::from(cpid),
        },
    }
}

/// The kernel's form of an aggregation.
fn aggregation(agg: &KernelAgg) -> Result<Aggregation, TooLarge> {
    let mut kernel = Aggregation {
        map: u16::try_from(agg.map + 1).map_err(|_| TooLarge("too many maps"))?,
        how: AGG_PLAIN,
        ..Aggregation::default()
    };
    match agg.kind {
        MapKind::Hist => kernel.how = AGG_LOG2,
        MapKind::Lhist { min, max, step } => {
            (kernel.how, kernel.min, kernel.max, kernel.step) = (AGG_LINEAR, min, max, step);
        }
        _ => {}
    }
    for (slot, part) in kernel.keys.iter_mut().zip(&agg.keys) {
        *slot = match part {
            KeyPart::Comm => named(SUBJECT_COMM),
            KeyPart::Probe => named(SUBJECT_PROBE),
            KeyPart::Func => named(SUBJECT_FUNC),
            KeyPart::Int(subject) => read(*subject).operand(),
        };
    }
    kernel.value = match agg.sample {
        None => KernelOperand::default(),
        Some(Sample::Const(constant)) => KernelOperand {
            constant,
            ..named(SUBJECT_CONST)
        },
        Some(Sample::Int(subject)) => read(subject).operand(),
        Some(Sample::Elapsed { divisor }) => KernelOperand {
            constant: divisor,
            ..named(SUBJECT_ELAPSED)
        },
    };
    Ok(kernel)
}

/// The kernel's form of a start time it keeps.
fn starts(start: &KeptStart) -> Result<Starts, TooLarge> {
    let (map, key) = match *start {
        KeptStart::Store { map, key, .. } | KeptStart::Take { map, key, .. } => (map, key),
    };
    let mut kernel = Starts {
        map: u16::try_from(map + 1).map_err(|_| TooLarge("too many maps"))?,
        key: read(key).operand(),
        ..Starts::default()
    };
    kernel.tombstone = u8::from(by_thread(&kernel));
    match *start {
        KeptStart::Store { send, .. } => {
            kernel.how = STARTS_STORE;
            kernel.send = u8::from(send);
        }
        KeptStart::Take {
            required, delete, ..
        } => {
            kernel.how = STARTS_TAKE;
            kernel.required = u8::from(required);
            kernel.delete = u8::from(delete);
        }
    }
    Ok(kernel)
}

/// Whether the kernel leaves the starts of `starts`' map as 0 when taken:
/// they are kept by thread ([`tid_starts`]).
fn by_thread(starts: &Starts) -> bool {
    starts.key.subject == SUBJECT_TID && starts.map <= LAST_TID_STARTS
}

/// The bits of the maps whose starts the kernel keeps by thread, for
/// `weft_abi::oneliner::TID_STARTS_GLOBAL`.
pub fn tid_starts(plan: &Plan) -> u64 {
    (plan.attaches.iter().filter_map(|a| a.start.as_ref()))
        .filter_map(|start| starts(start).ok())
        .filter(by_thread)
        .fold(0, |bits, starts| bits | 1 << starts.map)
}

/// An operand that is its subject alone.
fn named(subject: u8) -> KernelOperand {
    KernelOperand {
        subject,
        ..Default::default()
    }
}

/// How the kernel reads a subject.
struct Read {
    subject: u8,
    offset: u32,
    size: u8,
    signed: u8,
}

impl Read {
    fn operand(self) -> KernelOperand {
        KernelOperand {
            subject: self.subject,
            size: self.size,
            signed: self.signed,
            offset: self.offset,
            ..Default::default()
        }
    }
}

fn read(subject: Subject) -> Read {
    let id = |subject| Read {
        subject,
        offset: 0,
        size: 8,
        signed: 0,
    };
    match subject {
        Subject::Pid => id(SUBJECT_PID),
        Subject::Tid => id(SUBJECT_TID),
        Subject::Uid => id(SUBJECT_UID),
        Subject::Cpu => id(SUBJECT_CPU),
        Subject::Field {
            offset,
            size,
            signed,
        } => Read {
            subject: SUBJECT_FIELD,
            offset: u32::from(offset),
            size: size as u8,
            signed: u8::from(signed),
        },
    }
}

#[cfg(test)]
mod tests {
    use weft_abi::oneliner::{SUBJECT_NONE, USES_AGG, USES_COMM, USES_FILTERS};

    use super::*;
    use crate::check::tests::checked;

    /// Attach point `index`'s configuration, `-c`'s pid 4242.
    /// Attach point `index`'s configuration, as with a `-c` command whose
    /// pid is 4242.
    fn lowered(text: &str, index: usize) -> ProbeConfig {
        let mut program = crate::parse::parse(text).unwrap();
        program.command = Some("cat".into());
        let plan = crate::check::check(program, &crate::check::tests::FakeKernel).unwrap();
        config(index, &plan.attaches[index], 4242).unwrap()
    }

    #[test]
    fn only_weft_s_own_acts_are_left_out() {
        let program = "tracepoint:syscalls:sys_enter_read { @a = count(); }
            tracepoint:sched:sched_process_exec { @b = count(); }
            BEGIN { @c = count(); }
            kprobe:vfs_read { @d = count(); }";
        let live: Vec<u8> = (0..4).map(|i| lowered(program, i).live).collect();
        assert_eq!(live, [LIVE, LIVE_ANY_THREAD, LIVE_IN_WEFT, LIVE]);
    }

    #[test]
    fn filters_and_keys_become_the_kernel_s_operands() {
        let config = lowered(
            r#"tracepoint:syscalls:sys_enter_read /pid == cpid && args->fd > 2 && comm == "cat"/ { @[comm] = count(); }"#,
            0,
        );
        let filters: Vec<_> = config
            .filters
            .iter()
            .take_while(|f| f.subject != SUBJECT_NONE)
            .map(|f| (f.subject, f.op, f.offset, f.size, f.value))
            .collect();
        assert_eq!(
            filters,
            [
                (SUBJECT_PID, OP_EQ, 0, 8, 4242),
                (SUBJECT_FIELD, OP_GT, 16, 8, 2)
            ]
        );
        assert_eq!(
            (config.match_comm, config.comm),
            (1, weft_abi::comm_bytes("cat"))
        );
        assert_eq!((config.agg.map, config.agg.how), (1, AGG_PLAIN));
        assert_eq!(config.agg.keys[0].subject, SUBJECT_COMM);
        // The program is loaded with these parts of its body only.
        assert_eq!(config.uses(), USES_FILTERS | USES_COMM | USES_AGG);
    }

    #[test]
    fn a_linear_histogram_reads_its_field_in_the_kernel() {
        let config = lowered(
            "tracepoint:syscalls:sys_enter_read { @ = lhist(args->count, 0, 100, 10); }",
            0,
        );
        let agg = config.agg;
        assert_eq!(
            (agg.how, agg.min, agg.max, agg.step),
            (AGG_LINEAR, 0, 100, 10)
        );
        assert_eq!(
            (agg.value.subject, agg.value.offset, agg.value.size),
            (SUBJECT_FIELD, 32, 8)
        );
    }

    #[test]
    fn the_latency_idiom_keeps_and_takes_its_start_in_the_kernel() {
        let text = "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } \
             tracepoint:syscalls:sys_exit_read /@start[tid]/ { @us = hist((nsecs - @start[tid]) / 1000); delete(@start[tid]); }";
        let enter = lowered(text, 0);
        assert_eq!(
            (
                enter.starts.how,
                enter.starts.key.subject,
                enter.starts.send
            ),
            (STARTS_STORE, SUBJECT_TID, 0)
        );
        let exit = lowered(text, 1);
        assert_eq!(
            (exit.starts.how, exit.starts.required, exit.starts.delete),
            (STARTS_TAKE, 1, 1)
        );
        assert_eq!(exit.starts.map, enter.starts.map);
        assert_eq!(
            (
                exit.agg.how,
                exit.agg.value.subject,
                exit.agg.value.constant
            ),
            (AGG_LOG2, SUBJECT_ELAPSED, 1000)
        );
        // Kept by thread: a taken start stays as 0, which a thread's exit
        // removes; keyed by anything else, it is deleted.
        assert_eq!((enter.starts.tombstone, exit.starts.tombstone), (1, 1));
        assert_eq!(tid_starts(&checked(text)), 1 << enter.starts.map);
        let by_pid = text.replace("tid]", "pid]");
        assert_eq!(lowered(&by_pid, 1).starts.tombstone, 0);
        assert_eq!(tid_starts(&checked(&by_pid)), 0);
    }

    #[test]
    fn a_string_argument_is_copied_from_its_pointer() {
        let config = lowered(
            r#"tracepoint:syscalls:sys_enter_openat { printf("%s\n", str(args->filename)); }"#,
            0,
        );
        assert_eq!(
            (
                config.strings,
                config.string_kinds[0],
                config.string_offsets[0]
            ),
            (1, STRING_POINTER, 24)
        );
        assert_eq!(config.agg.map, 0, "nothing aggregates in the kernel");
    }
}
