//! The argument source (`--args`): the file-related system calls again, each
//! with what its arguments say of the file: the descriptor of the
//! read/write/send/receive families with the bytes asked for, and the path
//! an open-family call was given, read from the caller's memory at its
//! return. The kernel knows descriptors, not names: user space names each
//! descriptor from the opens it saw (or `/proc` for one opened earlier) and
//! fills in [`ArgsEvent::file`] before the record is stored.
//!
//! Its programs attach only to these calls' own tracepoints
//! (`syscalls:sys_enter_NAME`), so the syscall probe's path stays as it is.

use crate::events::Header;

/// One completed file-related system call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArgsEvent {
    /// Source and CPU.
    pub header: Header,
    /// `CLOCK_MONOTONIC` time of the return, in ns.
    pub exit_ns: u64,
    /// Time from entry to exit, in ns.
    pub duration_ns: u64,
    /// The call's return value (negative errno on failure).
    pub ret: i64,
    /// Thread group id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// x86-64 syscall number.
    pub nr: u32,
    /// The descriptor the call is on (`openat`'s directory descriptor; -1
    /// for `open` and `creat`, which take none).
    pub fd: i32,
    /// Bytes asked for (`count`, `len`) where the call takes them; the last
    /// descriptor of `close_range`; else 0.
    pub count: u64,
    /// The file's number in the capture's `paths` source: 0 from the
    /// kernel, filled in by user space (0 stays: unknown).
    pub file: u32,
    /// The path the call was given (open family; else 0): from the
    /// kernel, how many of its bytes follow the record (its NUL left out);
    /// as stored, its number in the capture's `paths` source, as given (a
    /// relative path stays relative there, where `file` is made absolute).
    pub given: u32,
}

impl ArgsEvent {
    /// The record at the start of `bytes` as the kernel wrote it; `None`
    /// when too short.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // ArgsEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// Size of an [`ArgsEvent`] record.
pub const EVENT_SIZE: usize = 64;
const _: () = assert!(core::mem::size_of::<ArgsEvent>() == EVENT_SIZE);

/// The longest path kept (a power of two: the kernel bounds lengths with
/// a mask the verifier can follow), its NUL included; longer ones are cut.
pub const MAX_PATH: usize = 256;
const _: () = assert!(MAX_PATH.is_power_of_two());

/// An [`ArgsEvent`] with room for a path: the kernel fills one per CPU
/// and sends its first `EVENT_SIZE + given` bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArgsSnap {
    /// The record.
    pub event: ArgsEvent,
    /// The path, NUL-terminated.
    pub path: [u8; MAX_PATH],
}

/// A call between its entry and its exit, in task storage.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ArgsInFlight {
    /// `CLOCK_MONOTONIC` time of entry, in ns.
    pub enter_ns: u64,
    /// The arguments the record keeps: the descriptor, the bytes (or
    /// `close_range`'s last), the path's address in the caller's memory.
    pub fd: u64,
    /// See `fd`.
    pub count: u64,
    /// See `fd`.
    pub path: u64,
    /// Syscall number.
    pub nr: u32,
    /// 1 between entry and exit.
    pub active: u32,
}

/// Byte offset of `args[0]` in every `syscalls:sys_enter_NAME` record
/// (`struct syscall_trace_enter`: the common header, `int nr`, then
/// `unsigned long args[]`), the same on every kernel since 2.6.33.
pub const TP_ARGS_OFFSET: usize = 16;

/// The x86-64 calls the source records, by number: how each names its
/// file. Programs and user space read this one table.
pub mod calls {
    /// `read(fd, buf, count)`.
    pub const READ: u32 = 0;
    /// `write(fd, buf, count)`.
    pub const WRITE: u32 = 1;
    /// `open(path, flags, mode)`.
    pub const OPEN: u32 = 2;
    /// `close(fd)`.
    pub const CLOSE: u32 = 3;
    /// `pread64(fd, buf, count, pos)`.
    pub const PREAD64: u32 = 17;
    /// `pwrite64(fd, buf, count, pos)`.
    pub const PWRITE64: u32 = 18;
    /// `dup(fd)`.
    pub const DUP: u32 = 32;
    /// `dup2(fd, newfd)`.
    pub const DUP2: u32 = 33;
    /// `socket(domain, type, protocol)`.
    pub const SOCKET: u32 = 41;
    /// `accept(fd, addr, len)`.
    pub const ACCEPT: u32 = 43;
    /// `sendto(fd, buf, len, ...)`.
    pub const SENDTO: u32 = 44;
    /// `recvfrom(fd, buf, len, ...)`.
    pub const RECVFROM: u32 = 45;
    /// `fcntl(fd, cmd, arg)`: recorded for `F_DUPFD` and `F_DUPFD_CLOEXEC`.
    pub const FCNTL: u32 = 72;
    /// `creat(path, mode)`.
    pub const CREAT: u32 = 85;
    /// `openat(dirfd, path, flags, mode)`.
    pub const OPENAT: u32 = 257;
    /// `accept4(fd, addr, len, flags)`.
    pub const ACCEPT4: u32 = 288;
    /// `dup3(fd, newfd, flags)`.
    pub const DUP3: u32 = 292;
    /// `close_range(first, last, flags)`.
    pub const CLOSE_RANGE: u32 = 436;
    /// `openat2(dirfd, path, how, size)`.
    pub const OPENAT2: u32 = 437;
    /// `fcntl`'s commands that duplicate a descriptor.
    pub const F_DUPFD: u64 = 0;
    /// See [`F_DUPFD`].
    pub const F_DUPFD_CLOEXEC: u64 = 1030;

    /// Whether the call's third argument is a byte count.
    #[must_use]
    pub const fn counts_bytes(nr: u32) -> bool {
        matches!(nr, READ | WRITE | PREAD64 | PWRITE64 | SENDTO | RECVFROM)
    }

    /// Which argument holds the path of an open-family call.
    #[must_use]
    pub const fn path_arg(nr: u32) -> Option<usize> {
        match nr {
            OPEN | CREAT => Some(0),
            OPENAT | OPENAT2 => Some(1),
            _ => None,
        }
    }

    /// Whether the call returns a new descriptor that names no path
    /// (a socket: user space reads its name from `/proc`).
    #[must_use]
    pub const fn creates(nr: u32) -> bool {
        matches!(nr, SOCKET | ACCEPT | ACCEPT4)
    }

    /// Whether the call returns a new descriptor for the one in its first
    /// argument (the dup family).
    #[must_use]
    pub const fn duplicates(nr: u32) -> bool {
        matches!(nr, DUP | DUP2 | DUP3 | FCNTL)
    }
}
