use super::*;
use crate::{
    kernel::{Element, KernelType, format_fields},
    parse,
    plan::{Hook, KeptStart, KeyPart, Read, ReadKind, Sample},
};
type Result<T> = std::result::Result<T, String>;

/// Tracepoints as this kernel's tracefs describes them.
pub struct FakeKernel;

const OPENAT: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n";
const EXIT_READ: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
const ENTER_READ: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:char * buf;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n";
const EXECVE: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:const char * filename;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:const char *const * argv;\toffset:24;\tsize:8;\tsigned:0;\n";
const EXEC: &str = "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n";
const NANOSLEEP: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:struct __kernel_timespec * rqtp;\toffset:16;\tsize:8;\tsigned:0;\n";
const RAW_ENTER: &str = "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n";
const RAW_EXIT: &str = "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";

/// Kernel structs: (id, name, members (name, offset, type)).
type Members = &'static [(&'static str, u32, KernelType)];
const RECORDS: &[(u32, &str, Members)] = &[
    (
        1,
        "struct task_struct",
        &[
            (
                "pid",
                4,
                KernelType::Int {
                    size: 4,
                    signed: true,
                },
            ),
            ("real_parent", 8, KernelType::Pointer(Some(1))),
            ("comm", 200, KernelType::Chars(16)),
            ("se", 40, KernelType::Record(2)),
            ("name", 64, KernelType::Pointer(None)),
            // `struct __kernel_timespec limits[4]`, `unsigned long bits[2]`,
            // `struct task_struct *kids[2]`.
            (
                "limits",
                300,
                KernelType::Array {
                    element: Element::Record(4),
                    stride: 16,
                    count: 4,
                },
            ),
            (
                "bits",
                400,
                KernelType::Array {
                    element: Element::Int {
                        size: 8,
                        signed: false,
                    },
                    stride: 8,
                    count: 2,
                },
            ),
            (
                "kids",
                420,
                KernelType::Array {
                    element: Element::Pointer(Some(1)),
                    stride: 8,
                    count: 2,
                },
            ),
        ],
    ),
    (
        2,
        "struct sched_entity",
        &[("cfs_rq", 16, KernelType::Pointer(Some(3)))],
    ),
    (
        3,
        "struct cfs_rq",
        &[(
            "nr_running",
            24,
            KernelType::Int {
                size: 4,
                signed: false,
            },
        )],
    ),
    (
        4,
        "struct __kernel_timespec",
        &[
            (
                "tv_sec",
                0,
                KernelType::Int {
                    size: 8,
                    signed: true,
                },
            ),
            (
                "tv_nsec",
                8,
                KernelType::Int {
                    size: 8,
                    signed: true,
                },
            ),
        ],
    ),
    (
        5,
        "struct file",
        &[
            ("f_path", 64, KernelType::Record(6)),
            ("f_next", 8, KernelType::Pointer(Some(5))),
        ],
    ),
    (
        6,
        "struct path",
        &[("dentry", 8, KernelType::Pointer(None))],
    ),
];

impl Kernel for FakeKernel {
    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
        [
            ("syscalls", "sys_enter_openat"),
            ("syscalls", "sys_enter_read"),
            ("syscalls", "sys_exit_read"),
            ("syscalls", "sys_enter_execve"),
            ("sched", "sched_process_exec"),
            ("syscalls", "sys_enter_nanosleep"),
            ("raw_syscalls", "sys_enter"),
            ("raw_syscalls", "sys_exit"),
        ]
        .into_iter()
        .filter(|(c, n)| {
            crate::kernel::glob_match(category, c) && crate::kernel::glob_match(name, n)
        })
        .map(|(c, n)| (c.to_string(), n.to_string()))
        .collect()
    }
    fn tracepoint_fields(&self, _: &str, name: &str) -> Result<Vec<Field>> {
        Ok(format_fields(match name {
            "sys_enter_openat" => OPENAT,
            "sys_enter_read" => ENTER_READ,
            "sys_exit_read" => EXIT_READ,
            "sys_enter_execve" => EXECVE,
            "sys_enter_nanosleep" => NANOSLEEP,
            "sys_enter" => RAW_ENTER,
            "sys_exit" => RAW_EXIT,
            _ => EXEC,
        }))
    }
    fn has_raw_tracepoint(&self, _: &str) -> bool {
        false
    }
    fn has_kprobes(&self) -> bool {
        true
    }
    fn functions(&self, glob: &str) -> Vec<String> {
        ["vfs_read", "vfs_write"]
            .into_iter()
            .filter(|f| crate::kernel::glob_match(glob, f))
            .map(str::to_string)
            .collect()
    }
    /// `filp_close(struct file *filp, void *id)` and
    /// `vfs_getattr(const struct path *path, ...)`; no other.
    fn function(&self, name: &str) -> Result<crate::kernel::Signature> {
        let arg = |name: &str, pointee: Option<&str>| (name.into(), pointee.map(Into::into));
        let args = match name {
            "filp_close" => vec![arg("filp", Some("struct file")), arg("id", None)],
            "vfs_getattr" => vec![arg("path", Some("struct path")), arg("stat", None)],
            _ => return Err("no BTF here".into()),
        };
        Ok(crate::kernel::Signature {
            args,
            returns: None,
            module: None,
        })
    }
    fn record(&self, name: &str) -> Result<u32> {
        RECORDS
            .iter()
            .find(|r| r.1 == name)
            .map(|r| r.0)
            .ok_or_else(|| format!("no `{name}`"))
    }
    fn record_name(&self, id: u32) -> String {
        RECORDS
            .iter()
            .find(|r| r.0 == id)
            .map(|r| r.1.to_string())
            .unwrap_or_default()
    }
    fn record_size(&self, id: u32) -> u32 {
        if id == 4 { 16 } else { id * 1000 }
    }
    fn member(&self, id: u32, name: &str) -> Result<crate::kernel::Member> {
        RECORDS
            .iter()
            .find(|r| r.0 == id)
            .and_then(|r| r.2.iter().find(|m| m.0 == name))
            .map(|m| crate::kernel::Member {
                offset: m.1,
                ty: m.2,
            })
            .ok_or_else(|| format!("no member `{name}`"))
    }
    fn member_names(&self, id: u32) -> Vec<String> {
        (RECORDS.iter().filter(|r| r.0 == id))
            .flat_map(|r| r.2.iter().map(|m| m.0.to_string()))
            .collect()
    }
    fn enumerator(&self, name: &str) -> Option<i64> {
        (name == "TCP_FIN_WAIT1").then_some(4)
    }
    fn symbol(&self, name: &str) -> Option<u64> {
        (name == "avenrun").then_some(0xffff_ffff_8300_0000)
    }
    fn cgroup_id(&self, path: &str) -> Result<u64> {
        (path == "/sys/fs/cgroup/weft")
            .then_some(25)
            .ok_or_else(|| format!("{path} is not a cgroup v2 directory"))
    }
    fn record_align(&self, _: u32) -> u32 {
        8
    }
    fn typedef(&self, _: &str) -> Option<crate::kernel::Shape> {
        None
    }
    fn paths(&self, pattern: &str) -> Vec<String> {
        ["/usr/lib/libshop.so.1", "/usr/lib/libshop.so.2"]
            .into_iter()
            .filter(|p| crate::kernel::glob_match(pattern, p))
            .map(str::to_owned)
            .collect()
    }
    fn process_files(&self, pid: u32) -> Result<Vec<String>> {
        Err(format!("no process {pid} here"))
    }
    /// `add(int a, const char *name, struct point *p, struct
    /// holder *q, char c, char d, char e)` in any file; `struct
    /// holder` holds a struct the file only declares.
    fn uprobe_parameters(&self, _: &str, function: &str) -> Result<Option<crate::UserFunction>> {
        if function == "damaged" {
            return Err("prog: DWARF: a damaged unit".into());
        }
        if function != "add" {
            return Ok(None);
        }
        let types = parse(
            "struct point { int x; long y; struct point *next; }; \
                 struct opaque; struct holder { struct opaque o; int z; }; BEGIN {}",
        )
        .unwrap()
        .definitions
        .records;
        let int = |size, signed| crate::ast::TypeRef {
            base: crate::ast::Base::Int { size, signed },
            pointers: 0,
            dims: Vec::new(),
        };
        let pointer = |base| crate::ast::TypeRef {
            base,
            pointers: 1,
            dims: Vec::new(),
        };
        let record = |name: &str| crate::ast::Base::Record(name.into());
        let params = vec![
            ("a".into(), int(4, true)),
            (
                "name".into(),
                pointer(crate::ast::Base::Int {
                    size: 1,
                    signed: true,
                }),
            ),
            ("p".into(), pointer(record("struct point"))),
            ("q".into(), pointer(record("struct holder"))),
            ("c".into(), int(1, false)),
            ("d".into(), int(1, false)),
            ("e".into(), int(1, false)),
        ];
        Ok(Some(crate::UserFunction {
            params,
            records: types,
        }))
    }
    fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>)> {
        let functions = ["main", "readline", "readline_internal", "rl_read_key"];
        Ok((
            format!("/usr/bin/{path}"),
            functions.map(str::to_owned).to_vec(),
        ))
    }
    fn usdt(&self, path: &str) -> Result<(String, Vec<crate::kernel::UsdtSite>)> {
        let site = |provider: &str, name: &str, args: &str| crate::kernel::UsdtSite {
            provider: provider.into(),
            name: name.into(),
            args: args.into(),
            offset: 0,
            semaphore: 0,
        };
        // `tick` has two sites, which place their arguments apart.
        Ok((
            format!("/usr/bin/{path}"),
            vec![
                site("app", "tick", "8@%rdi 4@$3"),
                site("app", "start", "8@%rsi -4@-8(%rbp)"),
                site("app", "tick", "8@%rax 8@sym(%rip)"),
            ],
        ))
    }
}

pub fn checked(text: &str) -> Plan {
    check(parse(text).unwrap(), &FakeKernel).unwrap()
}

/// Why the checker refuses `text`.
pub(crate) fn refused(text: &str) -> String {
    check(parse(text).unwrap(), &FakeKernel)
        .unwrap_err()
        .message
}

/// What the kernel reads for `attach`: each read's start, pointers,
/// offset, length and kind.
fn reads(attach: &Attach) -> Vec<(Start, &[u32], u32, u32, ReadKind)> {
    (attach.reads.iter())
        .map(|r| (r.start, r.hops.as_slice(), r.at, r.len, r.kind))
        .collect()
}

/// Each attach point's start, with the map named.
fn kept_starts(plan: &Plan) -> Vec<Option<(String, KeptStart)>> {
    plan.attaches
        .iter()
        .map(|a| {
            a.start.map(|s| {
                let (KeptStart::Store { map, .. } | KeptStart::Take { map, .. }) = s;
                (plan.maps[map].name.clone(), s)
            })
        })
        .collect()
}

/// `unsigned int fd` in its 8-byte slot, read whole as bpftrace reads it.
const READ_FD: Subject = Subject::Field {
    offset: 16,
    size: 8,
    signed: false,
};

#[test]
fn the_kernel_keeps_a_start_a_later_probe_takes() {
    // The idiom: nothing reaches user space, the latency aggregates in
    // the kernel, the predicate and the delete are gone from the probe.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } \
             tracepoint:syscalls:sys_exit_read /@start[tid]/ { @us[comm] = hist((nsecs - @start[tid]) / 1000); delete(@start[tid]); } \
             END { clear(@start); }",
    );
    let map = plan.map("start").unwrap();
    assert_eq!(
        kept_starts(&plan),
        [
            Some((
                "start".to_owned(),
                KeptStart::Store {
                    map,
                    key: Subject::Tid,
                    send: false
                }
            )),
            Some((
                "start".to_owned(),
                KeptStart::Take {
                    map,
                    key: Subject::Tid,
                    required: true,
                    delete: true
                }
            )),
            None,
        ]
    );
    assert_eq!(plan.program.items[0].body.len(), 0);
    assert!(plan.program.items[1].predicate.is_none());
    assert_eq!(plan.program.items[1].body.len(), 1);
    let agg = plan.attaches[1]
        .agg
        .as_ref()
        .expect("aggregated in the kernel");
    assert_eq!(agg.sample, Some(Sample::Elapsed { divisor: 1000 }));

    // Keyed by a field at the store; a store among other actions is
    // sent too; a take whose predicate user space finishes keeps the
    // rest of it, and the read stays where it is.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_read { @start[args.fd] = nsecs; @n = count(); } \
             tracepoint:syscalls:sys_exit_read /@start[tid] && args.ret * 2 > 0/ { printf(\"%d\\n\", nsecs - @start[tid]); }",
    );
    assert_eq!(
        kept_starts(&plan),
        [
            Some((
                "start".to_owned(),
                KeptStart::Store {
                    map,
                    key: READ_FD,
                    send: true
                }
            )),
            Some((
                "start".to_owned(),
                KeptStart::Take {
                    map,
                    key: Subject::Tid,
                    required: true,
                    delete: false
                }
            )),
        ]
    );
    assert!(matches!(
        plan.program.items[1].predicate.as_ref().map(|p| &p.kind),
        Some(ExprKind::Binary(BinOp::Gt, ..))
    ));
    assert!(plan.attaches[1].agg.is_none());

    // sslsnoop's shape: `!= 0` asks for a start too, and the delete
    // may come before other statements once nothing reads it after.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; @fd[tid] = args.fd; } \
             tracepoint:syscalls:sys_exit_read /@start[tid] != 0/ { printf(\"%d %d\\n\", (nsecs - @start[tid]) / 1000, @fd[tid]); delete(@start[tid]); delete(@fd[tid]); }",
    );
    assert_eq!(
        kept_starts(&plan)[1],
        Some((
            "start".to_owned(),
            KeptStart::Take {
                map,
                key: Subject::Tid,
                required: true,
                delete: true
            }
        ))
    );
    assert!(plan.program.items[1].predicate.is_none());
    assert_eq!(plan.program.items[1].body.len(), 2);
}

#[test]
fn a_start_used_otherwise_stays_in_user_space() {
    let enter = "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } ";
    for exit in [
        // Read while the kernel would still hold it.
        "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); } interval:s:1 { print(@start); }",
        // Deleted before it is read, or not last.
        "tracepoint:syscalls:sys_exit_read { delete(@start[tid]); @x = hist(nsecs - @start[tid]); }",
        // exit() leaves it to be printed.
        "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); exit(); delete(@start[tid]); }",
        // Deleted where user space may find the predicate false.
        "tracepoint:syscalls:sys_exit_read /@start[tid] && args.ret * 2 > 0/ { @x = hist(nsecs - @start[tid]); delete(@start[tid]); }",
        // Two keys in one probe.
        "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); delete(@start[pid]); }",
        // Stored and read in one probe; stored inside a block.
        "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); @start[tid] = nsecs; }",
        "tracepoint:syscalls:sys_exit_read { if (args.ret > 0) { @start[tid] = nsecs; } @x = hist(nsecs - @start[tid]); }",
        // Changed otherwise.
        "tracepoint:syscalls:sys_exit_read { @start[tid] += 1; }",
    ] {
        let plan = checked(&format!("{enter}{exit}"));
        assert!(plan.attaches.iter().all(|a| a.start.is_none()), "{exit}");
    }
    // Not the time, and a predicate the kernel does not test whole.
    for program in [
        "tracepoint:syscalls:sys_enter_read { @start[tid] = 1; } tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); }",
        "tracepoint:syscalls:sys_enter_read /args.fd * 2 > 1/ { @start[tid] = nsecs; } tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); }",
    ] {
        let plan = checked(program);
        assert!(plan.attaches.iter().all(|a| a.start.is_none()), "{program}");
    }
}

#[test]
fn the_kernel_aggregates_what_nothing_else_reads() {
    // Per attach point: the aggregation's map, key and sample.
    type Kept = Option<(usize, Vec<KeyPart>, Option<Sample>)>;
    let kept = |text: &str| -> Vec<Kept> {
        checked(text)
            .attaches
            .iter()
            .map(|a| {
                a.agg
                    .as_ref()
                    .map(|agg| (agg.map, agg.keys.clone(), agg.sample))
            })
            .collect()
    };
    let count = Subject::Field {
        offset: 32,
        size: 8,
        signed: false,
    };
    // `unsigned int fd` in its 8-byte slot, read whole as bpftrace reads it.
    let fd = Subject::Field {
        offset: 16,
        size: 8,
        signed: false,
    };
    // Keyed by comm, tid, probe, a field or nothing; predicates the
    // kernel tests whole.
    assert_eq!(
        kept(
            "tracepoint:syscalls:sys_enter_read /pid == 42/ { @[comm] = count(); } tracepoint:syscalls:sys_exit_read { @n = count(); } tracepoint:syscalls:sys_enter_openat { @t[tid] = count(); }"
        ),
        [
            Some((0, vec![KeyPart::Comm], None)),
            Some((1, vec![], None)),
            Some((2, vec![KeyPart::Int(Subject::Tid)], None)),
        ]
    );
    assert_eq!(
        kept(
            "tracepoint:syscalls:sys_enter_read /args.fd == 3/ { @b[comm, args.fd] = sum(args.count); } tracepoint:syscalls:sys_enter_read { @h[probe] = hist(args.count); }"
        ),
        [
            Some((
                0,
                vec![KeyPart::Comm, KeyPart::Int(fd)],
                Some(Sample::Int(count))
            )),
            Some((1, vec![KeyPart::Probe], Some(Sample::Int(count)))),
        ]
    );
    assert_eq!(
        kept("tracepoint:syscalls:sys_enter_read { @[cpu] = lhist(-3, 0, 10, 1); }"),
        [Some((
            0,
            vec![KeyPart::Int(Subject::Cpu)],
            Some(Sample::Const(-3))
        ))]
    );
    // Printing a map reads none of its values.
    assert_eq!(
        kept(
            "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } interval:s:1 { print(@); }"
        )[0],
        Some((0, vec![KeyPart::Comm], None))
    );
    for text in [
        // Another action, a key or sample the kernel does not make,
        // percentiles, three keys, two aggregations, a predicate part
        // run in weft, a map read, cleared or deleted from.
        r#"tracepoint:syscalls:sys_enter_read { @[comm] = count(); printf("x"); }"#,
        "tracepoint:syscalls:sys_enter_read { @[args.fd + 1] = count(); }",
        "tracepoint:syscalls:sys_enter_read { @ = sum(args.count * 2); }",
        "tracepoint:syscalls:sys_enter_read { @ = percentiles(args.count); }",
        "tracepoint:syscalls:sys_enter_read { @[pid, tid, cpu] = count(); }",
        "tracepoint:syscalls:sys_enter_read { @a = count(); @b = count(); }",
        "tracepoint:syscalls:sys_enter_read /args.count * 2 > 10/ { @[comm] = count(); }",
        "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } END { printf(\"%d\", @[\"a\"]); }",
        "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } interval:s:1 { clear(@); }",
        "tracepoint:syscalls:sys_enter_read { @[pid] = count(); } tracepoint:syscalls:sys_exit_read { delete(@[pid]); }",
    ] {
        assert_eq!(kept(text)[0], None, "{text}");
    }
}

#[test]
fn join_reads_one_pointer_array_per_probe() {
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_execve { join(args.argv); join(args.argv, ","); }"#,
    );
    let join = plan.attaches[0].join.as_ref().expect("a join");
    assert_eq!((join.name.as_str(), join.offset), ("argv", 24));
    assert!(
        refused("tracepoint:syscalls:sys_enter_openat { join(args.dfd); }")
            .contains("`dfd` is not a pointer")
    );
    assert!(
        refused("tracepoint:syscalls:sys_enter_execve { join(args.argv, 5); }")
            .contains("separator must be a string literal")
    );
    assert!(
        refused("tracepoint:syscalls:sys_enter_execve { join(args.argv); join(args.filename); }")
            .contains("a probe can join() one array")
    );
}

#[test]
fn simple_predicate_parts_go_to_the_kernel() {
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_read /pid == 42 && 4096 < args.count && comm == "dd" && @x[tid]/ { @x[tid] = 1; }"#,
    );
    let attach = &plan.attaches[0];
    assert_eq!(attach.comm.as_deref(), Some("dd"));
    assert_eq!(
        attach.filters,
        vec![
            Filter {
                subject: Subject::Pid,
                op: BinOp::Eq,
                value: Operand::Int(42)
            },
            Filter {
                subject: Subject::Field {
                    offset: 32,
                    size: 8,
                    signed: false
                },
                op: BinOp::Gt,
                value: Operand::Int(4096)
            },
        ]
    );
    // Only what the predicate and actions read is copied.
    assert_eq!(attach.raw_len, 40);
}

#[test]
fn only_read_fields_and_strings_are_copied() {
    let plan = checked("tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }");
    assert_eq!(plan.attaches[0].raw_len, 0);
    assert!(plan.attaches[0].strings.is_empty());
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_openat { printf("%s\n", str(args.filename)); } tracepoint:sched:sched_process_exec { printf("%s\n", str(args.filename)); }"#,
    );
    assert_eq!(plan.attaches[0].raw_len, 0);
    assert_eq!(
        plan.attaches[0].strings[0].kind,
        FieldKind::Pointer { constant: true }
    );
    assert_eq!(plan.attaches[1].strings[0].kind, FieldKind::DataLoc);
}

/// opensnoop's idiom: a pointer saved at the entry, `str()` of it at the
/// exit. The map holds the string, read at the entry; a pointer the
/// syscall writes through (read's buffer) is refused, saying why.
#[test]
fn a_saved_input_pointer_keeps_its_string() {
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_openat { @name[tid] = args.filename; }
               tracepoint:syscalls:sys_exit_read /@name[tid]/ { printf("%s\n", str(@name[tid], 8)); }"#,
    );
    assert_eq!(plan.maps[0].kind, MapKind::Value(Type::Str));
    assert_eq!(
        plan.attaches[0].strings[0].kind,
        FieldKind::Pointer { constant: true }
    );
    let err = check(
        parse(
            r#"tracepoint:syscalls:sys_enter_read { @buf[tid] = args.buf; }
                   tracepoint:syscalls:sys_exit_read { printf("%s\n", str(@buf[tid])); }"#,
        )
        .unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert!(
        err.message
            .starts_with("`buf` points to data the kernel may still write"),
        "{}",
        err.message
    );
    // Without str() of the map, a saved pointer stays a number.
    let plan = checked("tracepoint:syscalls:sys_enter_read { @buf[tid] = args.buf; }");
    assert_eq!(plan.maps[0].kind, MapKind::Value(Type::Int));
}

#[test]
fn globs_expand_and_fields_must_exist_in_every_match() {
    let plan = checked("tracepoint:syscalls:sys_e*_read { @[probe] = count(); }");
    let names: Vec<String> = plan.attaches.iter().map(|a| a.target.name()).collect();
    assert_eq!(
        names,
        [
            "tracepoint:syscalls:sys_enter_read",
            "tracepoint:syscalls:sys_exit_read"
        ]
    );
    let err = check(
        parse("tracepoint:syscalls:sys_e*_read { @ = hist(args.ret); }").unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "tracepoint:syscalls:sys_enter_read has no field `ret`: it has __syscall_nr, fd, buf, count"
    );
}

/// A map assigned only variables, maps, members or tuples takes the
/// type of the first assignment checked; tuple types are their
/// elements', and misuse says what and where.
#[test]
fn maps_and_tuples_take_the_types_of_their_values() {
    let plan = checked(
        r#"BEGIN { $s = "a"; @s = $s; @t = (1, ("x", 2)); @c = @s; @u = @t; @n = count(); }"#,
    );
    let kind = |name: &str| plan.maps[plan.map(name).unwrap()].kind;
    assert_eq!(kind("s"), MapKind::Value(Type::Str));
    assert_eq!(kind("c"), MapKind::Value(Type::Str));
    assert!(matches!(kind("t"), MapKind::Value(Type::Tuple(_))));
    assert_eq!(kind("t"), kind("u"));
    for (program, message) in [
        (
            r#"BEGIN { @t = (1, "a"); @t = (1, 2); }"#,
            "@t must be a tuple (int, string), not a tuple (int, int)",
        ),
        (
            r#"BEGIN { $t = (1, (2, "a")); $t = (1, 2); }"#,
            "$t holds a tuple (int, (int, string)) and cannot also hold a tuple (int, int)",
        ),
        (
            r#"BEGIN { $t = (1, 2); printf("%d\n", $t.2); }"#,
            "this tuple has 2 elements, .0 to .1",
        ),
        (
            r#"BEGIN { $t = (1, 2); printf("%d\n", $t); }"#,
            "this value is a tuple: print it with print(), or its elements ($t.0)",
        ),
        (
            "BEGIN { @[(1, 2)] = count(); }",
            "a tuple cannot be a map key: key the map by its parts, as in @map[$a, $b]",
        ),
        (
            "BEGIN { $t = (1, 2); $x = $t * 2; }",
            "this is a tuple: only == and != apply to tuples (compare an element, $t.0)",
        ),
        (
            "BEGIN { $x = 1; @m = $x; @m = count(); }",
            "@m holds a value elsewhere and cannot also hold count()",
        ),
        ("BEGIN { unwatch(); }", "unwatch() takes one address"),
        // lhist()'s bounds, as bpftrace 0.17 checks and words them.
        (
            "BEGIN { @l = lhist(1, -20, 0, 5); }",
            "lhist() min must be non-negative (provided min -20)",
        ),
        (
            "BEGIN { @l = lhist(1, 10, 5, 1); }",
            "lhist() min must be less than max (provided min 10 and max 5)",
        ),
        (
            "BEGIN { @l = lhist(1, 0, 4, 5); }",
            "lhist() step is too large for the given range (provided step 5 for range 4)",
        ),
        (
            "BEGIN { @l = lhist(1, 0, 10, 0); }",
            "lhist() step must be >= 1 (0 provided)",
        ),
        (
            r#"BEGIN { unwatch("x"); }"#,
            "unwatch()'s address must be an integer, not a string",
        ),
        (
            "BEGIN { $x = unwatch(1); }",
            "unwatch() is a statement and has no value",
        ),
    ] {
        let err = check(parse(program).unwrap(), &FakeKernel).unwrap_err();
        assert_eq!(err.message, message, "{program}");
    }
}

#[test]
fn usdt_sites_place_their_arguments_apart() {
    let plan = checked("usdt:app:tick { @[arg0] = count(); }");
    let sites: Vec<(String, u16)> = plan
        .attaches
        .iter()
        .map(|a| (a.target.name(), a.field("arg0").unwrap().offset))
        .collect();
    let tick = "usdt:/usr/bin/app:app:tick".to_string();
    assert_eq!(sites, [(tick.clone(), 112), (tick, 80)], "rdi, then rax");
    // A register argument is copied; one in memory is read by the
    // kernel, 8 bytes below the address in rbp.
    let plan = checked("usdt:app:app:s* { @ = sum(arg1); }");
    assert_eq!(plan.attaches.len(), 1);
    let read = &plan.attaches[0].reads[0];
    assert_eq!(
        (read.hops.as_slice(), read.at),
        (&[32][..], (-8i32).cast_unsigned())
    );
    let err = check(
        parse("usdt:app:tick { @ = sum(arg1); }").unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert!(
        err.message
            .starts_with("`arg1` of this USDT probe is in a place weft does not read"),
        "{}",
        err.message
    );
    let err = check(
        parse("usdt:app:nope { @ = count(); }").unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert_eq!(err.message, "/usr/bin/app has no USDT probe *:nope");
}

#[test]
fn kprobes_name_registers() {
    let plan = checked("kretprobe:vfs_* { @[func, retval] = count(); }");
    assert_eq!(plan.attaches.len(), 2);
    assert!(plan.attaches[0].field("retval").is_some());
    assert_eq!(plan.attaches[0].raw_len, 88);
    // `reg()`: the kernel copies the registers up to the one read
    // (`ip` ends at byte 136 of `struct pt_regs`).
    let plan = checked(r#"kprobe:vfs_read { @[reg("ip")] = count(); }"#);
    assert_eq!(plan.attaches[0].raw_len, 136);
    for (program, message) in [
        (
            r#"kprobe:vfs_read { @[reg("eip")] = count(); }"#,
            "`eip` is not an x86-64 register of struct pt_regs (ip, sp, ax, di, r8, ...)",
        ),
        (
            r#"tracepoint:syscalls:sys_enter_read { @[reg("ip")] = count(); }"#,
            "reg() exists in kprobes and uprobes, whose context is the registers",
        ),
    ] {
        let err = check(parse(program).unwrap(), &FakeKernel).unwrap_err();
        assert_eq!(err.message, message);
    }
}

#[test]
fn struct_members_are_read_in_the_kernel() {
    // naptime.bt's shape: members behind a tracepoint's pointer field
    // and behind curtask, near ones sharing a read.
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_nanosleep /args->rqtp->tv_sec + args->rqtp->tv_nsec/ {
                $task = (struct task_struct *)curtask;
                printf("%d %s %d\n", $task->real_parent->pid, $task->real_parent->comm, args->rqtp->tv_nsec);
            }"#,
    );
    let attach = &plan.attaches[0];
    assert_eq!(
        attach.reads,
        vec![
            Read {
                start: Start::Context,
                hops: vec![16],
                at: 0,
                len: 16,
                kind: ReadKind::Bytes
            },
            Read {
                start: Start::Task,
                hops: vec![8],
                at: 4,
                len: 4,
                kind: ReadKind::Bytes
            },
            Read {
                start: Start::Task,
                hops: vec![8],
                at: 200,
                len: 16,
                kind: ReadKind::Bytes
            },
        ]
    );
    let members: Vec<_> = attach
        .members
        .iter()
        .map(|m| (m.read, m.at, m.size, m.signed, m.chars))
        .collect();
    assert_eq!(
        members,
        [
            (0, 0, 8, true, false),
            (0, 8, 8, true, false),
            (1, 4, 4, true, false),
            (2, 200, 16, false, true),
            (0, 8, 8, true, false),
        ]
    );
    // Nothing of the record itself is copied: the pointer is followed
    // in the kernel.
    assert_eq!(attach.raw_len, 0);
    // `.` into a member struct, then `->` on: one pointer followed
    // from curtask, through se.cfs_rq.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_nanosleep { @[((struct task_struct *)curtask)->se.cfs_rq->nr_running] = count(); }",
    );
    assert_eq!(
        plan.attaches[0].reads,
        vec![Read {
            start: Start::Task,
            hops: vec![56],
            at: 24,
            len: 4,
            kind: ReadKind::Bytes
        }]
    );
}

#[test]
fn array_members_are_indexed_by_their_elements() {
    // An element's member, an integer element, and a pointer element
    // followed: `rlim[7].rlim_cur`, `cpus_mask.bits[0]`, `kids[1]->pid`.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_nanosleep { \
           @[curtask->limits[2].tv_nsec, curtask->bits[1], curtask->kids[1]->pid, \
             sizeof(curtask->limits), sizeof(curtask->bits)] = count(); }",
    );
    let attach = &plan.attaches[0];
    let reads: Vec<_> = (attach.reads.iter())
        .map(|r| (r.start, r.hops.clone(), r.at, r.len))
        .collect();
    assert_eq!(
        reads,
        [
            (Start::Task, vec![], 300 + 2 * 16 + 8, 8),
            (Start::Task, vec![], 408, 8),
            (Start::Task, vec![428], 4, 4),
        ]
    );
    let sizes: Vec<_> = (attach.members.iter())
        .map(|m| (m.size, m.signed))
        .collect();
    assert_eq!(sizes, [(8, true), (8, false), (4, true)]);
    let error = |text: &str| {
        let program = format!("tracepoint:syscalls:sys_enter_nanosleep {{ print({text}); }}");
        check(parse(&program).unwrap(), &FakeKernel)
            .unwrap_err()
            .message
    };
    assert_eq!(
        error("curtask->limits[4].tv_sec"),
        "the index 4 is out of bounds for array of size 4"
    );
    // A struct element is read whole, laid out by its members.
    let program = "tracepoint:syscalls:sys_enter_nanosleep { print(curtask->limits[1]); }";
    let plan = check(parse(program).unwrap(), &FakeKernel).unwrap();
    let whole = &plan.attaches[0];
    assert_eq!(whole.members[0].layout, Some(0));
    assert!(matches!(&whole.layouts[0], crate::plan::Layout::Record(m) if m.len() == 2));
}

#[test]
fn a_dereference_in_a_kernel_probe_is_read_in_the_kernel() {
    // bpftrace's forms: a pointer cast (its size and sign), pointer
    // arithmetic (whole pointees), an address plus bytes, and a
    // pointer read through another and gone back from.
    let plan = checked(
        r#"tracepoint:syscalls:sys_enter_nanosleep {
                printf("%d %d %d %d\n", *(int64 *)args->rqtp, *((int32 *)args->rqtp + 3),
                    *(uint8 *)((uint64)args->rqtp + 9), *(int16 *)(*(uint64 *)args->rqtp - 4));
            }"#,
    );
    let attach = &plan.attaches[0];
    let reads: Vec<_> = (attach.reads.iter())
        .map(|r| {
            (
                r.start,
                r.hops.as_slice(),
                r.at,
                r.len,
                (r.kind == ReadKind::String),
            )
        })
        .collect();
    let context = Start::Context;
    assert_eq!(
        reads,
        [
            (context, &[16][..], 0, 16, false),
            (context, &[16, 0][..], -4i32 as u32, 2, false),
        ]
    );
    let members: Vec<_> = attach
        .members
        .iter()
        .map(|m| (m.read, m.at, m.size, m.signed))
        .collect();
    assert_eq!(
        members,
        [
            (0, 0, 8, true),
            (0, 12, 4, true),
            (0, 9, 1, false),
            (1, -4i32 as u32, 2, true),
        ]
    );
    assert!(
        refused("tracepoint:syscalls:sys_enter_nanosleep { @ = *(args->rqtp + nsecs); }")
            .contains("weft follows pointers from")
    );
    // A fixed address is read in the kernel, BEGIN's too (there BEGIN
    // then runs in the kernel, as bpftrace runs it).
    let plan =
        checked("BEGIN, tracepoint:syscalls:sys_enter_nanosleep { @ = *kaddr(\"avenrun\"); }");
    for attach in &plan.attaches {
        assert_eq!(attach.reads[0].start, Start::Address(0xffff_ffff_8300_0000));
    }
    assert!(plan.attaches[0].kernel_run);
    // The string behind a pointer read through another: argv[1].
    let plan = checked(
        "tracepoint:syscalls:sys_enter_execve { @[str(*((uint64)args.argv + 8))] = count(); }",
    );
    let read = &plan.attaches[0].reads[0];
    assert_eq!(
        (
            read.hops.as_slice(),
            read.at,
            (read.kind == ReadKind::String)
        ),
        (&[24, 8][..], 0, true)
    );
    assert!(
        refused("tracepoint:syscalls:sys_enter_execve { @[str(*(uint32 *)args.argv)] = count(); }")
            .contains("8-byte pointer")
    );
    // A typed pointer steps by what it points to, as bpftrace steps
    // it, and `p[i]` is `*(p + i)`: argv's are pointers, a char
    // array member's chars.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_execve { @[str(args->argv[1]), *(args.argv + 2), curtask->comm[1]] = count(); }",
    );
    let attach = &plan.attaches[0];
    let reads: Vec<_> = (attach.reads.iter())
        .map(|r| {
            (
                r.start,
                r.hops.as_slice(),
                r.at,
                r.len,
                (r.kind == ReadKind::String),
            )
        })
        .collect();
    assert_eq!(
        reads,
        [
            (context, &[24, 8][..], 0, 64, true),
            (context, &[24][..], 16, 8, false),
            (Start::Task, &[][..], 201, 1, false),
        ]
    );
    let members: Vec<_> = (attach.members.iter())
        .map(|m| (m.read, m.at, m.size, m.signed))
        .collect();
    assert_eq!(
        members,
        [(0, 0, 64, false), (1, 16, 8, false), (2, 201, 1, true)]
    );
    // Bytes before the task's own are not the kernel's to read.
    assert!(
        refused("tracepoint:syscalls:sys_enter_nanosleep { @ = *((uint8 *)curtask - 1); }")
            .contains("out of reach")
    );
}

#[test]
fn pointers_saved_per_thread_are_kept_in_the_kernel_too() {
    let program = |key: &str| {
        format!(
            "tracepoint:syscalls:sys_enter_openat {{ @f[{key}] = args.filename; }} \
                 tracepoint:syscalls:sys_exit_read /@f[{key}]/ {{ printf(\"%s\\n\", str(@f[{key}])); delete(@f[{key}]); }} \
                 END {{ clear(@f); }}"
        )
    };
    let plan = checked(&program("tid"));
    let saves: Vec<_> = (plan.attaches[0].saves.iter())
        .map(|(f, m)| (f.name.as_str(), *m))
        .collect();
    assert_eq!(saves, [("filename", 0)]);
    assert_eq!(plan.attaches[1].saved, [0]);
    assert_eq!(plan.attaches[1].saved_slot(0), Some(0));
    // Keyed otherwise, the string is the one read where it is saved.
    let plan = checked(&program("pid"));
    assert!(plan.attaches[0].saves.is_empty());
    assert!(plan.attaches[1].saved.is_empty());
}

#[test]
fn struct_pointers_saved_per_thread_are_read_through_later() {
    // bpftrace's idiom for a function's exit, whose arguments are gone.
    let plan = checked(
        "tracepoint:syscalls:sys_enter_nanosleep { $t = args.rqtp; @t[tid] = $t; @n[tid] = args.rqtp; } \
         tracepoint:syscalls:sys_exit_read /@t[tid]/ { $p = (struct __kernel_timespec *)@t[tid]; \
           printf(\"%d %d\\n\", $p->tv_nsec, ((struct __kernel_timespec *)@n[tid])->tv_sec); delete(@t[tid]); }",
    );
    let saves: Vec<_> = (plan.attaches[0].saves.iter())
        .map(|(f, m)| (f.name.as_str(), plan.maps[*m].name.as_str()))
        .collect();
    assert_eq!(saves, [("rqtp", "t"), ("rqtp", "n")]);
    let starts: Vec<_> = plan.attaches[1]
        .reads
        .iter()
        .map(|r| (r.start, r.at))
        .collect();
    assert_eq!(starts, [(Start::Saved(0), 8), (Start::Saved(1), 0)]);
    // The map still holds the address, and strings are read for none.
    assert!(plan.attaches[1].saved.is_empty());
    // Kept from something the kernel cannot keep, it says so.
    let error = refused(
        "tracepoint:syscalls:sys_enter_nanosleep { @t[tid] = args.rqtp + 8; } \
         tracepoint:syscalls:sys_exit_read { print(((struct __kernel_timespec *)@t[tid])->tv_sec); }",
    );
    assert!(error.contains("from an argument or a field"), "{error}");
}

#[test]
fn str_of_a_pointer_member_reads_its_string_in_the_kernel() {
    let plan = checked(
        "tracepoint:syscalls:sys_enter_nanosleep { printf(\"%s %s\\n\", str(curtask->name), str(curtask->comm)); }",
    );
    assert_eq!(
        plan.attaches[0].reads,
        vec![
            Read {
                start: Start::Task,
                hops: vec![64],
                at: 0,
                len: 64,
                kind: ReadKind::String
            },
            Read {
                start: Start::Task,
                hops: vec![],
                at: 200,
                len: 16,
                kind: ReadKind::Bytes
            },
        ]
    );
    let error = check(
        parse("tracepoint:syscalls:sys_enter_nanosleep { print(str(curtask->pid)); }").unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "str() reads a char array, or the string a pointer or address member points to"
    );
}

#[test]
fn signal_is_sent_by_the_kernel_where_it_alone_decides() {
    let checked_unsafe = |text: &str| {
        let mut program = parse(text).unwrap();
        program.unsafe_calls = true;
        check(program, &FakeKernel)
    };
    let plan = checked_unsafe(
            r#"tracepoint:syscalls:sys_enter_openat /pid == 42 && comm == "x"/ { signal("SIGUSR1"); @ = count(); }"#,
        )
        .unwrap();
    assert_eq!(plan.attaches[0].signal, Some(10));
    let refused_unsafe = checked_unsafe("tracepoint:syscalls:sys_enter_openat { override(-1); }");
    assert!(
        refused_unsafe
            .unwrap_err()
            .message
            .contains("CONFIG_BPF_KPROBE_OVERRIDE")
    );
    assert_eq!(
        checked_unsafe("tracepoint:syscalls:sys_enter_openat { signal(9); }")
            .unwrap()
            .attaches[0]
            .signal,
        Some(9)
    );
    for (text, message) in [
        (
            r#"tracepoint:syscalls:sys_enter_openat /@m[tid]/ { signal("KILL"); @m[tid] = 1; }"#,
            "the kernel must test the whole predicate",
        ),
        (
            r#"tracepoint:syscalls:sys_enter_openat { if (pid == 1) { signal("KILL"); } }"#,
            "cannot be under an `if` or `while`",
        ),
        (
            r#"BEGIN { signal("KILL"); }"#,
            "can not be used with \"BEGIN\" probes",
        ),
        (
            r#"tracepoint:syscalls:sys_enter_openat { signal("FOO"); }"#,
            "FOO is not a valid signal",
        ),
        (
            "tracepoint:syscalls:sys_enter_openat { signal(99); }",
            "99 is not a valid signal, allowed range: [1,64]",
        ),
    ] {
        let error = checked_unsafe(text).unwrap_err();
        assert!(error.message.contains(message), "{text}: {}", error.message);
    }
    let error = check(
        parse(r#"tracepoint:syscalls:sys_enter_openat { signal("KILL"); }"#).unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert!(
        error.message.contains("needs --unsafe"),
        "{}",
        error.message
    );
}

#[test]
fn sizeof_becomes_the_size_of_its_type_or_expression() {
    let mut plan = checked(
        r#"tracepoint:syscalls:sys_enter_openat { $x = (int16)1;
               @[sizeof(struct task_struct), sizeof(curtask->comm), sizeof(curtask->se),
                 sizeof(curtask->real_parent), sizeof("ab"), sizeof(uint16), sizeof(comm),
                 sizeof($x), sizeof(str(args.filename)), sizeof(pid)] = count();
               @p[sizeof(*curtask->real_parent), sizeof(*(struct task_struct *)curtask)] = count(); }"#,
    );
    let mut sizes = Vec::new();
    plan.program.rewrite(&mut |expr| match &expr.kind {
        ExprKind::Int(n) => sizes.push(*n),
        ExprKind::SizeOf(_) => panic!("sizeof left: {expr:?}"),
        _ => {}
    });
    // (int16)1's 1, then the sizes in order.
    assert_eq!(
        sizes,
        [1, 1000, 16, 2000, 8, 3, 2, 16, 2, 64, 8, 1000, 1000]
    );
    // Not evaluated: the kernel reads no string for it.
    assert!(
        plan.attaches[0].strings.is_empty(),
        "{:?}",
        plan.attaches[0]
    );
    let error = check(
        parse("BEGIN { @ = sizeof(struct nosuch); }").unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert_eq!(error.message, "no `struct nosuch`");
    // A name inside resolves as anywhere else (this was 8, silently).
    assert!(refused("BEGIN { @ = sizeof(int); }").starts_with("unknown name `int`"));
}

#[test]
fn pton_gives_an_address_s_bytes_or_says_why_not() {
    checked(r#"BEGIN { $a = pton("10.0.0.1"); @[$a[0], ntop($a)] = count(); @v = pton("::1"); }"#);
    assert_eq!(
        refused(r#"BEGIN { @ = pton("10.0.0.256"); }"#),
        "pton(): `10.0.0.256` is not an IPv4 or IPv6 address"
    );
    assert!(refused(r#"BEGIN { $s = "1.2.3.4"; @ = pton($s); }"#).starts_with("pton() takes"));
    assert_eq!(
        refused(r#"BEGIN { @ = pton("1.2.3.4") + 1; }"#),
        "this is an array of bytes: only == and != apply to it (or index it, $a[0])"
    );
    assert_eq!(
        refused(r#"BEGIN { @ = pton("1.2.3.4") == pton("::1"); }"#),
        "cannot compare an array of 4 bytes with an array of 16 bytes"
    );
}

#[test]
fn a_uprobe_path_glob_is_every_file_with_the_function() {
    let plan = checked("uprobe:/usr/lib/libshop.so.*:readline { @ = count(); }");
    let paths: Vec<String> = (plan.attaches.iter())
        .map(|a| match &a.target {
            Target::Uprobe { path, .. } => path.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths, ["/usr/lib/libshop.so.1", "/usr/lib/libshop.so.2"]);
    assert_eq!(
        refused("uprobe:/opt/nothing*:readline { @ = count(); }"),
        "no file matches `/opt/nothing*`"
    );
    assert_eq!(
        refused("uprobe:/usr/lib/libshop.so.*:nope { @ = count(); }"),
        "no function of the 2 files matching `/usr/lib/libshop.so.*` is `nope`"
    );
}

/// Sizes bpftrace 0.17 prints for the same tuples: C structs of their
/// elements, strings byte-aligned.
#[test]
fn sizeof_a_tuple_is_bpftrace_s() {
    let mut plan = checked(
        r#"BEGIN { $t = ((int8)1, (int16)2); $u = (1, (2, "x"));
               @[sizeof((1, 2)), sizeof(((int8)1, (int16)2)), sizeof((1, "abc")),
                 sizeof(((int8)1, "abcdefghij")), sizeof(((int32)1, (int8)2, (int64)3)),
                 sizeof((comm, 1)), sizeof(("ab", (int8)1)), sizeof($t), sizeof($u),
                 sizeof(((int8)1, ((int8)2, (int32)3))), sizeof((pid, (int8)1))] = count(); }"#,
    );
    let mut sizes = Vec::new();
    plan.program.rewrite(&mut |expr| {
        if let (ExprKind::Int(n), true) = (&expr.kind, expr.span.len > 3) {
            sizes.push(*n);
        }
    });
    assert_eq!(sizes, [16, 4, 16, 12, 16, 24, 4, 4, 24, 12, 16]);
}

#[test]
fn arrays_of_arrays_are_read_row_by_row() {
    let plan = checked(
        "struct m { char pad; short h[2][3]; char n[4][8]; }
             tracepoint:syscalls:sys_enter_nanosleep { $m = (struct m *)args->rqtp;
               printf(\"%d %s %d\", $m->h[1][2], $m->n[3], sizeof($m->h[1])); }",
    );
    let members: Vec<_> = (plan.attaches[0].members.iter())
        .map(|m| (m.at, m.size, m.chars))
        .collect();
    // h from 2, its second row from 8, that row's third short at 12; n
    // from 14, its fourth row at 38, 8 chars.
    assert_eq!(members, [(12, 2, false), (38, 8, true)]);
    for (text, why) in [
        ("printf(\"%d\", $m->h[1])", "a row of 3 integers: index it"),
        (
            "printf(\"%d\", $m->h[2][0])",
            "the index 2 is out of bounds for array of size 2",
        ),
        (
            "printf(\"%d\", $m->h[1][3])",
            "the index 3 is out of bounds for array of size 3",
        ),
    ] {
        let program = format!(
            "struct m {{ char pad; short h[2][3]; }}
                 tracepoint:syscalls:sys_enter_nanosleep {{ $m = (struct m *)args->rqtp; {text}; }}"
        );
        assert!(
            refused(&program).contains(why),
            "{text}: {}",
            refused(&program)
        );
    }
}

#[test]
fn a_program_s_own_types_are_laid_out_as_c_lays_them_out() {
    let plan = checked(
        "struct ts { long sec; long nsec; };
             struct w { char c; struct ts t; unsigned int a : 3, b : 7; union { int i; long l; };
                        struct task_struct *task; char name[6]; }
             enum e { A = -1, B, C = 1 << 4, D }; enum { E = TCP_FIN_WAIT1 + C };
             tracepoint:syscalls:sys_enter_nanosleep { $w = (struct w *)args->rqtp;
               @[sizeof(struct w), sizeof(struct ts), A, B, C, D, E] = count();
               printf(\"%d %d %d %s\", $w->t.nsec, $w->l, $w->task->pid, $w->name); }",
    );
    let Stmt::MapAssign { map, .. } = &plan.program.items[0].body[1] else {
        panic!("{:?}", plan.program.items[0].body)
    };
    let keys: Vec<_> = map
        .keys
        .iter()
        .map(|k| match k.kind {
            ExprKind::Int(n) => n,
            _ => panic!("{k:?}"),
        })
        .collect();
    // c, then ts at 8, the bit-fields in one int at 24, the union at
    // 32, the pointer at 40, the name at 48: 54 bytes, 56 aligned.
    assert_eq!(keys, [56, 16, -1, 0, 16, 17, 20]);
    let members: Vec<_> = plan.attaches[0]
        .members
        .iter()
        .map(|m| {
            (
                plan.attaches[0].reads[m.read].hops.clone(),
                m.at,
                m.size,
                m.chars,
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            (vec![16], 16, 8, false),
            (vec![16], 32, 8, false),
            (vec![16, 40], 4, 4, false),
            (vec![16], 48, 6, true)
        ]
    );
}

#[test]
fn only_comparisons_whose_orders_differ_are_made_unsigned() {
    let predicate = |text: &str| {
        let plan = checked(text);
        let flipped = format!("{:?}", plan.program.items[0].predicate).contains("Xor");
        (flipped, plan.attaches[0].filters.len())
    };
    // A kprobe's retval is unsigned and may be 2^63 or more: flipped,
    // and left to weft.
    assert_eq!(
        predicate("kretprobe:vfs_read /retval < 0/ { @ = count(); }"),
        (true, 0)
    );
    assert_eq!(
        predicate("tracepoint:syscalls:sys_enter_read /pid > -1/ { @ = count(); }"),
        (true, 0)
    );
    // Both orders agree: unchanged, and tested in the kernel.
    assert_eq!(
        predicate("tracepoint:syscalls:sys_enter_read /pid > 100/ { @ = count(); }"),
        (false, 1)
    );
    assert_eq!(
        predicate("tracepoint:syscalls:sys_exit_read /args.ret < 0/ { @ = count(); }"),
        (false, 1)
    );
    assert_eq!(
        predicate("tracepoint:syscalls:sys_enter_read /args.count > 4096/ { @ = count(); }"),
        (false, 1)
    );
}

#[test]
fn uprobe_places_as_bpftrace_writes_them() {
    let symbols = |text: &str| -> Vec<String> {
        let plan = checked(text);
        (plan.attaches.iter())
            .map(|a| match &a.target {
                Target::Uprobe { symbol, .. } => symbol.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        symbols("uprobe:bash:readline* { @ = count(); }"),
        ["readline", "readline_internal"]
    );
    assert_eq!(symbols(r#"uprobe:bash:"main" { @ = count(); }"#), ["main"]);
    // An offset or an address is the kernel side's to place.
    assert_eq!(symbols("uprobe:bash:main+4 { @ = count(); }"), ["main+4"]);
    assert!(refused("uprobe:bash:nothing* { @ = count(); }").contains("matches `nothing*`"));
}

#[test]
fn a_program_s_bad_types_say_why() {
    let probe = "tracepoint:syscalls:sys_enter_nanosleep";
    for (text, says) in [
        (
            "struct a { struct b x; }; struct b { struct a y; };",
            "struct a holds itself",
        ),
        (
            "struct a { int x; }; struct a { int y; };",
            "struct a is defined twice",
        ),
        ("struct a { pid_t p; };", "unknown type `pid_t`"),
        (
            "struct a { struct nope n; };",
            "struct nope is neither defined",
        ),
        ("struct a { void v; };", "cannot be `void`"),
        ("struct a { long x : 65; };", "no wider than its type"),
        ("enum { A, B = A + C };", "unknown constant `C`"),
        ("enum { A }; enum { A };", "enumerator `A` is defined twice"),
    ] {
        let text = format!("{text} {probe} {{ exit(); }}");
        let message = refused(&text);
        assert!(message.contains(says), "{text}: {message}");
    }
    // A bit-field: the bytes that hold it, shifted and masked in weft.
    let plan = checked(&format!(
        "struct a {{ char c; int x : 3; int y : 7; }}; {probe} {{ print(((struct a *)args->rqtp)->y); }}"
    ));
    let m = &plan.attaches[0].members[0];
    // c is byte 0; x bits 8-10; y bits 11-17: from byte 1, bit 3, 7 bits.
    assert_eq!((m.at, m.size, m.signed, m.bits), (1, 2, true, Some((3, 7))));
}

#[test]
fn struct_members_that_cannot_be_read_say_why() {
    let error = |text: &str| {
        check(parse(text).unwrap(), &FakeKernel)
            .unwrap_err()
            .message
    };
    let probe = "tracepoint:syscalls:sys_enter_nanosleep";
    assert_eq!(
        error(&format!("{probe} {{ print(args->rqtp->tv_usec); }}")),
        "no member `tv_usec`"
    );
    assert_eq!(
        error(&format!("{probe} {{ print(curtask->se); }}")),
        "this is a struct sched_entity of 2000 bytes: weft reads one whole up to 64 bytes, so read one of its members"
    );
    assert_eq!(
        error(&format!("{probe} {{ print(args->__syscall_nr->x); }}")),
        "not a pointer to a kernel struct: cast it, as in `(struct sock *)arg0`"
    );
    assert_eq!(
        error(&format!("{probe} {{ print((struct nope *)args->rqtp); }}")),
        "no `struct nope`"
    );
    // Eight regions: the task, three parents up, two run queues, the
    // timespec, and a parent's run queue.
    assert_eq!(
        error(&format!(
            "{probe} {{ printf(\"%d %d %d %d %d %d %d %d\", curtask->pid, curtask->real_parent->pid, \
                 curtask->real_parent->real_parent->pid, \
                 curtask->real_parent->real_parent->real_parent->pid, \
                 curtask->se.cfs_rq->nr_running, args->rqtp->tv_sec, \
                 curtask->real_parent->se.cfs_rq->nr_running, \
                 curtask->real_parent->real_parent->se.cfs_rq->nr_running); }}"
        )),
        "a probe can read at most 7 strings and struct regions"
    );
}

#[test]
fn begin_end_and_intervals_that_read_the_kernel_run_there() {
    for probe in ["BEGIN", "END", "interval:s:1"] {
        let plan = checked(&format!("{probe} {{ @ = curtask->pid; }}"));
        assert!(plan.attaches[0].kernel_run, "{probe}");
        assert_eq!(plan.attaches[0].reads[0].start, Start::Task);
        let plan = checked(&format!("{probe} {{ @[kstack] = count(); }}"));
        assert!(plan.attaches[0].kstack && plan.attaches[0].in_kernel());
        // What weft reads itself keeps it there.
        let plan = checked(&format!("{probe} {{ @[comm, pid] = count(); }}"));
        assert!(!plan.attaches[0].in_kernel(), "{probe}");
    }
}

#[test]
fn curtask_as_a_value_is_its_address_copied_by_the_kernel() {
    let probe = "tracepoint:syscalls:sys_enter_nanosleep";
    for text in [
        format!("{probe} {{ print(curtask); }}"),
        format!(
            "{probe} {{ $t = (struct task_struct *)curtask; print($t); @[$t->pid] = count(); }}"
        ),
        "BEGIN { @ = curtask != 0; }".to_string(),
    ] {
        let plan = checked(&text);
        let attach = &plan.attaches[0];
        assert!(attach.in_kernel(), "{text}");
        let read = (attach.reads.iter())
            .find(|r| r.start == Start::TaskAddress)
            .unwrap_or_else(|| panic!("{text}: no address read"));
        assert_eq!((read.hops.len(), read.at, read.len), (0, 0, 8));
        let member = &attach.members[0];
        assert_eq!((member.at, member.size, member.signed), (0, 8, false));
    }
}

#[test]
fn cgroupid_is_the_cgroup_s_id_at_check_time() {
    let mut plan = checked(r#"BEGIN { @ = cgroupid("/sys/fs/cgroup/weft"); }"#);
    let mut ints = Vec::new();
    plan.program.rewrite(&mut |expr| {
        if let ExprKind::Int(n) = expr.kind {
            ints.push(n);
        }
    });
    assert_eq!(ints, [25]);
    let error = check(
        parse(r#"BEGIN { @ = cgroupid("/tmp"); }"#).unwrap(),
        &FakeKernel,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "cgroupid(): /tmp is not a cgroup v2 directory"
    );
}

#[test]
fn uprobe_arguments_by_name_from_dwarf() {
    let plan = checked(
        r#"uprobe:prog:add { printf("%d %s %d\n", args->a, str(args->name), args->p->next->x); }"#,
    );
    let fields = &plan.attaches[0].fields;
    let field = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
    // Parameter N in argument register N (`di`, `si`, `dx`, ...).
    assert_eq!(
        (field("a").offset, field("a").size, field("a").signed),
        (112, 4, true)
    );
    assert_eq!(field("name").offset, 104);
    assert_eq!(field("name").element, Some((1, true)));
    assert_eq!(field("p").pointee.as_deref(), Some("struct point"));
    assert_eq!(field("d").offset, 64);
    assert_eq!(field("e").kind, FieldKind::Unread);
    assert_eq!(
        refused("uprobe:prog:add { @ = args->nope; }"),
        "uprobe:prog:add has no argument `nope`: it has a, name, p, q, c, d, e"
    );
    // The seventh is on the stack.
    assert!(
        refused("uprobe:prog:add { @ = args->d + args->e; }")
            .starts_with("`e` is not in one of the six integer argument registers")
    );
    // A struct holding one the file only declares cannot be laid out.
    assert_eq!(
        refused("uprobe:prog:add { @ = args->q->z; }"),
        "struct holder is declared but not defined (where a uprobe's file describes it, it holds a type weft does not read), and no `struct holder`"
    );
    // A file's DWARF is read only for an item that names an argument.
    checked("uprobe:prog:damaged { @ = count(); }");
    assert_eq!(
        refused("uprobe:prog:damaged { @ = args->a; }"),
        "prog: DWARF: a damaged unit"
    );
    // The program's own definition wins over the file's.
    checked("struct point { long z; }; uprobe:prog:add { @ = args->p->z; }");
    assert!(refused("uretprobe:prog:add { @ = args->a; }").starts_with("a uretprobe has no"));
    assert!(refused("uprobe:prog:main { @ = args->a; }").ends_with(
        "(build it with -g, or install its debug file); arg0, arg1, ... read the registers"
    ));
}

/// A `raw_syscalls` probe that reads only what the raw context holds (the
/// number at entry, the return value at exit) attaches as a raw
/// tracepoint, the field in the context's second slot wherever the plan
/// reads it (pushed-down tests, the kernel's aggregation); one that reads
/// more attaches to the classic tracepoint, as does every probe whose
/// fields are all kept (`--store`) or that runs over a capture.
#[test]
fn raw_syscalls_attach_raw_where_the_raw_context_holds_what_they_read() {
    let plan = checked(
        "tracepoint:raw_syscalls:sys_enter /args->id == 39/ { @[comm] = count(); } \
         tracepoint:raw_syscalls:sys_exit { @ret = sum(args->ret); }",
    );
    let fields = |attach: &Attach| -> Vec<(String, u16)> {
        (attach.fields.iter())
            .map(|f| (f.name.clone(), f.offset))
            .collect()
    };
    let (enter, exit) = (&plan.attaches[0], &plan.attaches[1]);
    assert!(enter.hook == Hook::Raw && exit.hook == Hook::Raw);
    assert_eq!(fields(enter), [("id".to_string(), 8)]);
    assert_eq!(enter.filters.len(), 1);
    assert!(matches!(
        enter.filters[0].subject,
        Subject::Field { offset: 8, .. }
    ));
    assert_eq!(fields(exit), [("ret".to_string(), 8)]);
    let agg = exit.agg.as_ref().expect("the kernel sums");
    assert!(matches!(
        agg.sample,
        Some(Sample::Int(Subject::Field { offset: 8, .. }))
    ));
    for text in [
        "tracepoint:raw_syscalls:sys_enter { @[args->args[0]] = count(); }",
        "tracepoint:raw_syscalls:sys_exit { @[args->id] = sum(args->ret); }",
        "tracepoint:raw_syscalls:sys_exit { @ = sizeof(args->id); }",
    ] {
        let plan = checked(text);
        assert_eq!(plan.attaches[0].hook, Hook::AsWritten, "{text}");
        assert_eq!(plan.attaches[0].fields.len(), 2, "{text}");
    }
    let text = "tracepoint:raw_syscalls:sys_exit { @ = sum(args->ret); }";
    let mut program = parse(text).unwrap();
    program.all_fields = true;
    assert_eq!(
        check(program, &FakeKernel).unwrap().attaches[0].hook,
        Hook::AsWritten
    );
    let over_capture = crate::check::check_in_weft(parse(text).unwrap(), &FakeKernel).unwrap();
    assert_eq!(over_capture.attaches[0].hook, Hook::AsWritten);
}

#[test]
fn an_array_field_is_indexed_in_place() {
    let plan =
        checked("tracepoint:raw_syscalls:sys_enter { @[args->args[2], args.args[0]] = count(); }");
    let reads: Vec<_> = (plan.attaches[0].reads.iter())
        .map(|r| (r.start, r.hops.clone(), r.at, r.len))
        .collect();
    // In the record itself: no pointer followed, 8-byte elements from 16.
    assert_eq!(reads, [(Start::Context, vec![], 16, 24)]);
}

#[test]
fn pointer_keys_are_the_ones_bpftrace_types_as_pointers() {
    let plan = checked(
        "tracepoint:syscalls:sys_enter_nanosleep { $t = curtask; \
         @a[curtask, pid, $t, (uint8 *)args->rqtp, args->rqtp, curtask->real_parent, curtask->pid,
            (int32 *)0x10 + 1] = count(); }",
    );
    let keys = &plan.maps[plan.map("a").unwrap()].pointer_keys;
    assert_eq!(keys, &[true, false, true, true, true, true, false, true]);
}

#[test]
fn path_is_written_by_the_kernel_from_a_function_s_argument() {
    let plan = checked(
        r#"fentry:filp_close { printf("%s\n", path(args->filp->f_path)); }
           fexit:vfs_getattr { @[path(args->path)] = count(); }"#,
    );
    let reads: Vec<_> = (plan.attaches.iter())
        .map(|a| {
            let read = &a.reads[0];
            (read.hops.clone(), read.at, read.kind)
        })
        .collect();
    assert_eq!(
        reads,
        [(vec![0], 64, ReadKind::Path), (vec![0], 0, ReadKind::Path)]
    );
    let paths = crate::lower::paths(&plan).unwrap();
    let fentry = weft_abi::oneliner::path_index(false, 0, 0);
    let fexit = weft_abi::oneliner::path_index(true, 0, 0);
    assert_eq!(paths[fentry], weft_abi::oneliner::path_spec(0, 0, 64));
    assert_eq!(paths[fexit], weft_abi::oneliner::path_spec(0, 0, 0));
    assert_eq!(paths.iter().filter(|&&p| p != 0).count(), 2);
    // The kernel's bpf_d_path takes only pointers the verifier typed.
    assert!(
        refused(r#"fentry:filp_close { printf("%s", path(args->filp->f_next->f_path)); }"#)
            .contains("pointer read from memory")
    );
    assert!(
        refused(r#"fentry:filp_close { printf("%s", path(args->filp)); }"#)
            .contains("struct path or a pointer to one")
    );
    assert!(
        refused(r#"tracepoint:syscalls:sys_enter_openat { printf("%s", path(args->filename)); }"#)
            .contains("fentry, fexit and iterator probes only")
    );
}

#[test]
fn fentry_takes_the_module_bpftrace_s_kfunc_names() {
    // `kfunc:MODULE:FUNC`: the module must be the function's.
    let plan = checked("kfunc:vmlinux:filp_close { @ = count(); }");
    assert!(matches!(
        &plan.attaches[0].target,
        Target::Fentry { function, module: Some(m), .. } if function == "filp_close" && m == "vmlinux"
    ));
    assert_eq!(plan.attaches[0].target.name(), "fentry:vmlinux:filp_close");
    let error = refused("kfunc:ext4:filp_close { @ = count(); }");
    assert!(
        error.contains("`filp_close` is the kernel's own (vmlinux), not ext4's"),
        "{error}"
    );
}

#[test]
fn skboutput_takes_a_function_s_skb_argument_a_literal_file_and_offset() {
    let refusals = [
        (
            r#"tracepoint:syscalls:sys_enter_read { $r = skboutput("f", 0, 1, 0); }"#,
            "fentry and fexit probes only",
        ),
        (
            r"fentry:filp_close { $r = skboutput(comm, args->filp, 1, 0); }",
            "file is a string literal",
        ),
        (
            r#"fentry:filp_close { $r = skboutput("f", args->filp, 1, pid); }"#,
            "offset is a non-negative integer literal",
        ),
        (
            r#"fentry:filp_close { $r = skboutput("f", args->filp); }"#,
            "takes a file, a struct sk_buff, a length and an offset",
        ),
    ];
    for (program, why) in refusals {
        let error = refused(program);
        assert!(error.contains(why), "{program}: {error}");
    }
}

#[test]
fn stack_arguments_are_read_past_the_stack_pointer() {
    // `sargN` is the word 8 × (N + 1) bytes past pt_regs' `sp` (at 152):
    // the two share one read of the stack.
    let plan = checked("kprobe:vfs_read { @[sarg0, sarg2] = count(); }");
    assert_eq!(
        reads(&plan.attaches[0]),
        [(Start::Context, &[152][..], 8, 24, ReadKind::Bytes)]
    );
    assert!(
        refused("tracepoint:syscalls:sys_enter_read { @[sarg0] = count(); }")
            .contains("registers of kprobes, uprobes and USDT probes")
    );
}

#[test]
fn a_fixed_address_is_read_by_the_kernel() {
    // `kaddr("avenrun")` is a constant; the kernel reads 8 bytes there,
    // and from the pointer held 16 bytes past it.
    let plan = checked(
        r#"kprobe:vfs_read { @[*(uint64 *)kaddr("avenrun"), *(uint32 *)(*(uint64 *)(kaddr("avenrun") + 16) + 4)] = count(); }"#,
    );
    let avenrun = Start::Address(0xffff_ffff_8300_0000);
    let bytes = ReadKind::Bytes;
    assert_eq!(
        reads(&plan.attaches[0]),
        [
            (avenrun, &[][..], 0, 8, bytes),
            (avenrun, &[16][..], 4, 4, bytes)
        ]
    );
    let config = crate::lower::config(0, &plan.attaches[0], 0).unwrap();
    assert_eq!(config.chains[0].start, weft_abi::oneliner::START_ADDRESS);
    assert_eq!(config.chains[1].address(), 0xffff_ffff_8300_0000);
    assert_eq!(config.chains[1].offsets[0], 16);
}

#[test]
fn uaddr_names_a_symbol_of_a_user_probe_s_file() {
    assert!(
        refused(r#"tracepoint:syscalls:sys_enter_read { @ = *uaddr("environ"); }"#)
            .contains("uaddr() names a symbol of the file a uprobe, uretprobe or USDT probe names")
    );
    // The fake kernel reads no files.
    assert!(
        refused(r#"uprobe:/bin/sh:main { @ = *uaddr("environ"); }"#).contains("reads no files")
    );
}

#[test]
fn a_variable_holding_a_fixed_address_is_read_through_in_the_kernel() {
    // loads.bt's way: the interval runs in the kernel, which reads
    // avenrun's words, as bpftrace reads them (no /proc/kcore needed).
    let plan = checked(
        r#"interval:s:1 { $avenrun = kaddr("avenrun"); $load1 = *$avenrun; $load5 = *($avenrun + 8); printf("%d %d\n", $load1, $load5); }"#,
    );
    let attach = &plan.attaches[0];
    assert!(attach.kernel_run);
    let avenrun = Start::Address(0xffff_ffff_8300_0000);
    assert_eq!(reads(attach), [(avenrun, &[][..], 0, 16, ReadKind::Bytes)]);
}

#[test]
fn kretprobes_that_can_lock_up_the_kernel_are_refused_as_bpftrace_refuses_them() {
    assert_eq!(
        refused("kretprobe:_raw_spin_lock { @ = count(); }"),
        "kretprobe:_raw_spin_lock can't be used as it might lock up your system."
    );
    // A kprobe on it is fine.
    checked("kprobe:_raw_spin_lock { @ = count(); }");
}

#[test]
fn a_pointer_member_reads_the_integer_it_points_to() {
    let plan = checked(
        "struct C { int *z[4]; short *s; unsigned char *u; } \
         tracepoint:syscalls:sys_enter_nanosleep { \
           @[*((struct C *)args->rqtp)->z[1], *((struct C *)args->rqtp)->s, *((struct C *)args->rqtp)->u] = count(); }",
    );
    let sizes: Vec<(u16, bool)> = (plan.attaches[0].members.iter())
        .map(|m| (m.size, m.signed))
        .collect();
    assert_eq!(sizes, [(4, true), (2, true), (1, false)]);
}

#[test]
fn a_watchpoint_on_an_argument_is_set_by_a_uprobe_on_its_function() {
    let mut program = parse("watchpoint:read*+arg1:4:w { @ = count(); }").unwrap();
    let refused = check(program.clone(), &FakeKernel).unwrap_err().message;
    assert!(refused.contains("the -p or -c process"), "{refused}");
    program.command = Some("bash".into());
    let plan = check(program, &FakeKernel).unwrap();
    let names: Vec<String> = plan.attaches.iter().map(|a| a.target.name()).collect();
    assert_eq!(
        names,
        [
            "watchpoint:bash:readline:1:4:w",
            "watchpoint:bash:readline_internal:1:4:w",
            "uprobe:bash:readline",
            "uprobe:bash:readline_internal",
        ]
    );
    // Each uprobe copies arg1 (rsi), stops the `-c` command's task and
    // runs none of the actions.
    let setup = &plan.attaches[3];
    assert_eq!(setup.watch, Some(1));
    assert_eq!(setup.signal, Some(19));
    assert_eq!(setup.raw_len, 112);
    assert_eq!(setup.filters.len(), 1);
    assert_eq!(setup.filters[0].to_string(), "pid == cpid");
    // asyncwatchpoint does not stop it.
    let mut program = parse("asyncwatchpoint:readline+arg0:8:rw { @ = count(); }").unwrap();
    program.pid = Some(42);
    let plan = check(program, &FakeKernel).unwrap();
    assert_eq!(plan.attaches[1].signal, None);
    assert_eq!(plan.attaches[1].filters[0].to_string(), "pid == 42");
}

#[test]
fn cpid_needs_a_command() {
    let refused = refused("BEGIN { printf(\"%d\\n\", cpid); }");
    assert_eq!(refused, "cpid cannot be used without a -c command");
}
