//! What the kernel side needs to know of an event source: which programs
//! to attach where, and how big its records are. What the records' fields
//! mean, and how they are stored, is the recording side's business.

use std::path::Path;

use weft_abi::{
    args::ArgsEvent, block::BlockEvent, conns::ConnEvent, events::Source, net::PacketEvent,
    pagecache::PageCacheEvent, sched::SchedEvent, stacks::StackEvent, switch::SwitchEvent,
};

use crate::ebpf;

/// A source's programs and record size.
pub struct SourceHooks {
    pub source: Source,
    /// Its name on the command line, in messages and in captures.
    pub name: &'static str,
    pub hooks: &'static [Hook],
    /// Its programs are TC classifiers (`net_ingress`, `net_egress`)
    /// attached to network interfaces rather than to tracepoints.
    pub tc: bool,
    /// Its program (`stacks_sample`) samples on a perf clock event on
    /// every CPU rather than on tracepoints.
    pub sampled: bool,
    /// Bytes of its kernel record, the least a record of it has (a packet
    /// carries its first payload bytes after them).
    pub size: usize,
}

/// `sched`'s programs.
pub const SCHED: SourceHooks = SourceHooks {
    source: Source::Sched,
    name: "sched",
    hooks: &[
        Hook {
            program: "sched_switch",
            category: "sched",
            event: "sched_switch",
            offsets: &[
                ("SCHED_PREV_PID_OFFSET", "prev_pid"),
                ("SCHED_PREV_STATE_OFFSET", "prev_state"),
                ("SCHED_NEXT_PID_OFFSET", "next_pid"),
            ],
            without: None,
        },
        Hook {
            program: "sched_wakeup",
            category: "sched",
            event: "sched_wakeup",
            offsets: &[("SCHED_WAKEUP_PID_OFFSET", "pid")],
            without: None,
        },
        Hook {
            program: "sched_wakeup",
            category: "sched",
            event: "sched_wakeup_new",
            offsets: &[],
            without: None,
        },
    ],
    tc: false,
    sampled: false,
    size: size_of::<SchedEvent>(),
};

/// `block`'s programs.
pub const BLOCK: SourceHooks = SourceHooks {
    source: Source::Block,
    name: "block",
    hooks: &[
        Hook {
            program: "block_rq_issue",
            category: "block",
            event: "block_rq_issue",
            offsets: &[
                ("BLOCK_ISSUE_DEV_OFFSET", "dev"),
                ("BLOCK_ISSUE_SECTOR_OFFSET", "sector"),
                ("BLOCK_ISSUE_BYTES_OFFSET", "bytes"),
                ("BLOCK_ISSUE_RWBS_OFFSET", "rwbs"),
            ],
            without: None,
        },
        Hook {
            program: "block_rq_complete",
            category: "block",
            event: "block_rq_complete",
            offsets: &[
                ("BLOCK_DONE_DEV_OFFSET", "dev"),
                ("BLOCK_DONE_SECTOR_OFFSET", "sector"),
                ("BLOCK_DONE_ERROR_OFFSET", "error"),
                ("BLOCK_DONE_RWBS_OFFSET", "rwbs"),
            ],
            without: None,
        },
    ],
    tc: false,
    sampled: false,
    size: size_of::<BlockEvent>(),
};

/// The add and delete tracepoints share one record layout.
const ADD_DELETE_OFFSETS: &[(&str, &str)] = &[
    ("PAGECACHE_INO_OFFSET", "i_ino"),
    ("PAGECACHE_INDEX_OFFSET", "index"),
    ("PAGECACHE_DEV_OFFSET", "s_dev"),
    ("PAGECACHE_ORDER_OFFSET", "order?"),
];

/// `pagecache`'s programs.
pub const PAGECACHE: SourceHooks = SourceHooks {
    source: Source::PageCache,
    name: "pagecache",
    hooks: &[
        Hook {
            program: "pagecache_add",
            category: "filemap",
            event: "mm_filemap_add_to_page_cache",
            offsets: ADD_DELETE_OFFSETS,
            without: None,
        },
        Hook {
            program: "pagecache_delete",
            category: "filemap",
            event: "mm_filemap_delete_from_page_cache",
            offsets: ADD_DELETE_OFFSETS,
            without: None,
        },
        // Linux 6.10 on; without it there are adds and removals but no
        // lookups, so no hit ratio.
        Hook {
            program: "pagecache_lookup",
            category: "filemap",
            event: "mm_filemap_get_pages",
            offsets: &[
                ("PAGECACHE_LOOKUP_INO_OFFSET", "i_ino"),
                ("PAGECACHE_LOOKUP_DEV_OFFSET", "s_dev"),
                ("PAGECACHE_LOOKUP_INDEX_OFFSET", "index"),
                ("PAGECACHE_LOOKUP_LAST_OFFSET", "last_index"),
            ],
            without: Some("page lookups by reads, so no hit ratio"),
        },
    ],
    tc: false,
    sampled: false,
    size: size_of::<PageCacheEvent>(),
};

/// `net`'s programs.
pub const NET: SourceHooks = SourceHooks {
    source: Source::Net,
    name: "net",
    hooks: &[],
    tc: true,
    sampled: false,
    size: size_of::<PacketEvent>(),
};

/// `switch`'s programs.
pub const SWITCH: SourceHooks = SourceHooks {
    source: Source::Switch,
    name: "switch",
    hooks: &[Hook {
        program: "context_switch",
        category: "sched",
        event: "sched_switch",
        offsets: &[
            ("SCHED_PREV_PID_OFFSET", "prev_pid"),
            ("SCHED_PREV_STATE_OFFSET", "prev_state"),
            ("SCHED_NEXT_PID_OFFSET", "next_pid"),
        ],
        without: None,
    }],
    tc: false,
    sampled: false,
    size: size_of::<SwitchEvent>(),
};

/// `stacks`' program: a CPU profile (and, through `sched_switch`, the
/// stacks threads leave the CPU from when `sched` runs too).
pub const STACKS: SourceHooks = SourceHooks {
    source: Source::Stacks,
    name: "stacks",
    hooks: &[],
    tc: false,
    sampled: true,
    size: size_of::<StackEvent>(),
};

/// The sock tracepoints' shared record layout.
const SOCK_LENGTH_OFFSETS: &[(&str, &str)] = &[
    ("CONNS_SK_OFFSET", "sk"),
    ("CONNS_FAMILY_OFFSET", "family"),
    ("CONNS_PROTOCOL_OFFSET", "protocol"),
    ("CONNS_RET_OFFSET", "ret"),
];

/// `conns`'s programs (Linux 6.3 on, where the sock tracepoints give the
/// socket of every send and receive).
pub const CONNS: SourceHooks = SourceHooks {
    source: Source::Conns,
    name: "conns",
    hooks: &[
        Hook {
            program: "conns_send",
            category: "sock",
            event: "sock_send_length",
            offsets: SOCK_LENGTH_OFFSETS,
            without: None,
        },
        Hook {
            program: "conns_recv",
            category: "sock",
            event: "sock_recv_length",
            offsets: SOCK_LENGTH_OFFSETS,
            without: None,
        },
    ],
    tc: false,
    sampled: false,
    size: size_of::<ConnEvent>(),
};

/// The hooks of the calls `args` records: each call's entry and exit
/// tracepoint. Calls of three arguments or more enter through
/// `args_enter`, which reads three from its record; the others through
/// `args_enter_short`, which reads one (the kernel refuses to attach a
/// program that may read past a tracepoint's record).
macro_rules! call_hooks {
    ($($long:literal),*; $($short:literal),*) => {
        &[
            $(
                Hook {
                    program: "args_enter",
                    category: "syscalls",
                    event: concat!("sys_enter_", $long),
                    offsets: &[("ARGS_NR_OFFSET", "__syscall_nr")],
                    without: None,
                },
                Hook {
                    program: "args_exit",
                    category: "syscalls",
                    event: concat!("sys_exit_", $long),
                    offsets: &[("ARGS_NR_OFFSET", "__syscall_nr"), ("ARGS_RET_OFFSET", "ret")],
                    without: None,
                },
            )*
            $(
                Hook {
                    program: "args_enter_short",
                    category: "syscalls",
                    event: concat!("sys_enter_", $short),
                    offsets: &[("ARGS_NR_OFFSET", "__syscall_nr")],
                    without: None,
                },
                Hook {
                    program: "args_exit",
                    category: "syscalls",
                    event: concat!("sys_exit_", $short),
                    offsets: &[("ARGS_NR_OFFSET", "__syscall_nr"), ("ARGS_RET_OFFSET", "ret")],
                    without: None,
                },
            )*
        ]
    };
}

/// `args`'s programs: the read, write, send and receive families, the
/// open family, and the calls that make, copy and close descriptors (so
/// that user space can name each descriptor from the calls it saw). The
/// list is `weft_abi::args::calls`' and the kernel's names for them.
pub const ARGS: SourceHooks = SourceHooks {
    source: Source::Args,
    name: "args",
    hooks: call_hooks!(
        "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
        "preadv2", "pwritev2", "sendto", "recvfrom", "sendmsg", "recvmsg", "open", "openat",
        "openat2", "close_range", "dup3", "fcntl", "socket", "accept", "accept4", "connect";
        "fsync", "fdatasync", "creat", "close", "dup", "dup2"
    ),
    tc: false,
    sampled: false,
    size: size_of::<ArgsEvent>(),
};

/// A classic tracepoint a source's program attaches to, and the fields of
/// its record whose offsets (from tracefs) the program reads from globals.
pub struct Hook {
    pub program: &'static str,
    pub category: &'static str,
    pub event: &'static str,
    /// (global, tracepoint field) pairs; a field ending in `?` may be
    /// absent (older kernels), and its global is then `u32::MAX`.
    pub offsets: &'static [(&'static str, &'static str)],
    /// `None` when the source needs this tracepoint; else what the source
    /// lacks on a kernel without it.
    pub without: Option<&'static str>,
}

impl Hook {
    /// Whether the tracepoint exists on this kernel.
    fn exists(&self, tracefs: &Path) -> bool {
        ebpf::tracepoint_format(tracefs, self.category, self.event).exists()
    }
}

/// What a source can attach to on this kernel.
pub struct Availability {
    /// Its hooks whose tracepoints exist.
    pub present: Vec<&'static Hook>,
    /// Why it cannot attach at all, if it cannot: a needed tracepoint is missing.
    pub missing: Option<String>,
    /// What it lacks though it can attach: its optional tracepoints that do
    /// not exist.
    pub lacks: Vec<String>,
}

impl SourceHooks {
    /// Which of its tracepoints exist on this kernel, and what follows.
    pub fn availability(&self, tracefs: &Path) -> Availability {
        let (present, absent): (Vec<&'static Hook>, Vec<&'static Hook>) =
            self.hooks.iter().partition(|hook| hook.exists(tracefs));
        let missing = absent
            .iter()
            .find(|hook| hook.without.is_none())
            .map(|hook| {
                format!(
                    "tracepoint {}:{} does not exist on this kernel",
                    hook.category, hook.event
                )
            });
        let lacks = absent
            .iter()
            .filter_map(|hook| {
                Some(format!(
                    "no {} (tracepoint {}:{} does not exist on this kernel)",
                    hook.without?, hook.category, hook.event
                ))
            })
            .collect();
        Availability {
            present,
            missing,
            lacks,
        }
    }
}
