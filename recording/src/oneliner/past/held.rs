//! The arguments a capture's `args` source holds of the calls it takes,
//! played in their `sys_enter_NAME` records at the kernel's offsets and
//! under the kernel's names: the descriptor argument and, where the call
//! takes one, its byte count (`close_range`'s last descriptor), and the
//! path an open was given, as given, for `str()`. The rest of a call's
//! arguments (buffers, flags) are not held, and a program that reads them
//! is refused by name.
//!
//! `fcntl` is left out: the source records only the `fcntl`s that copy a
//! descriptor, so its entries are played from the `syscalls` source.

/// A call's held fields: the descriptor at offset 16 (type, name), a
/// count (type, name, offset), and the path an open was given (its
/// field's name and offset; a string to `str()`, its address 0).
struct Held {
    call: &'static str,
    fd: Option<(&'static str, &'static str)>,
    count: Option<(&'static str, &'static str, usize)>,
    path: Option<(&'static str, usize)>,
}

const fn held(
    call: &'static str,
    fd: Option<(&'static str, &'static str)>,
    count: Option<(&'static str, &'static str, usize)>,
) -> Held {
    Held {
        call,
        fd,
        count,
        path: None,
    }
}

const fn opens(
    call: &'static str,
    fd: Option<(&'static str, &'static str)>,
    path: (&'static str, usize),
) -> Held {
    Held {
        call,
        fd,
        count: None,
        path: Some(path),
    }
}

const UINT_FD: Option<(&str, &str)> = Some(("unsigned int", "fd"));
const ULONG_FD: Option<(&str, &str)> = Some(("unsigned long", "fd"));
const INT_FD: Option<(&str, &str)> = Some(("int", "fd"));
const BYTES: Option<(&str, &str, usize)> = Some(("size_t", "count", 32));

/// The calls, with their fields as `sys_enter_NAME/format` names them.
const HELD: &[Held] = &[
    held("read", UINT_FD, BYTES),
    held("write", UINT_FD, BYTES),
    held("pread64", UINT_FD, BYTES),
    held("pwrite64", UINT_FD, BYTES),
    held("readv", ULONG_FD, None),
    held("writev", ULONG_FD, None),
    held("preadv", ULONG_FD, None),
    held("pwritev", ULONG_FD, None),
    held("preadv2", ULONG_FD, None),
    held("pwritev2", ULONG_FD, None),
    held("sendto", INT_FD, Some(("size_t", "len", 32))),
    held("recvfrom", INT_FD, Some(("size_t", "size", 32))),
    held("sendmsg", INT_FD, None),
    held("recvmsg", INT_FD, None),
    held("accept", INT_FD, None),
    held("accept4", INT_FD, None),
    held("connect", INT_FD, None),
    held("fsync", UINT_FD, None),
    held("fdatasync", UINT_FD, None),
    held("close", UINT_FD, None),
    held("close_range", UINT_FD, Some(("unsigned int", "max_fd", 24))),
    held("dup", Some(("unsigned int", "fildes")), None),
    held("dup2", Some(("unsigned int", "oldfd")), None),
    held("dup3", Some(("unsigned int", "oldfd")), None),
    opens("openat", Some(("int", "dfd")), ("filename", 24)),
    opens("openat2", Some(("int", "dfd")), ("filename", 24)),
    opens("open", None, ("filename", 16)),
    opens("creat", None, ("pathname", 16)),
    held("socket", None, None),
];

fn find(call: &str) -> Option<&'static Held> {
    HELD.iter().find(|h| h.call == call)
}

/// Whether the `args` source holds call `call` (by its name).
pub fn holds(call: &str) -> bool {
    find(call).is_some()
}

/// The fields `sys_enter_CALL`'s record has over a capture with `args`,
/// after `__syscall_nr`, in a format file's words.
pub fn format(call: &str) -> String {
    let line = |ty: &str, name: &str, offset: usize| {
        let signed = u8::from(ty == "int");
        format!("\tfield:{ty} {name};\toffset:{offset};\tsize:8;\tsigned:{signed};\n")
    };
    let Some(held) = find(call) else {
        return String::new();
    };
    let fd = held.fd.map(|(ty, name)| line(ty, name, 16));
    let count = held.count.map(|(ty, name, at)| line(ty, name, at));
    let path = held.path.map(|(name, at)| line("const char *", name, at));
    fd.into_iter().chain(count).chain(path).collect()
}

/// Whether `field` of `sys_enter_CALL` is the path the `args` source
/// holds as given (a string the capture supplies).
pub fn is_path(call: &str, field: &str) -> bool {
    find(call)
        .and_then(|held| held.path)
        .is_some_and(|(name, _)| name == field)
}

/// Writes a call's held arguments into its rebuilt entry record, as the
/// kernel stores arguments: each a register's 8 bytes. The source keeps a
/// descriptor's 32 bits, and a caller passing an `int` leaves its register
/// zero-extended (bpftrace prints `openat`'s `AT_FDCWD` as 4294967196),
/// so that is how it plays.
pub fn fill(call: &str, fd: i32, count: u64, record: &mut [u8]) {
    let Some(held) = find(call) else {
        return;
    };
    if held.fd.is_some() {
        record[16..24].copy_from_slice(&u64::from(fd.cast_unsigned()).to_le_bytes());
    }
    if let Some((_, _, at)) = held.count {
        record[at..at + 8].copy_from_slice(&count.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn held_calls_are_those_the_source_takes_but_fcntl() {
        let taken: Vec<&str> = (weft_kernel::source::ARGS.hooks.iter())
            .filter_map(|hook| hook.event.strip_prefix("sys_enter_"))
            .filter(|call| *call != "fcntl")
            .collect();
        let mut held: Vec<&str> = super::HELD.iter().map(|h| h.call).collect();
        let mut taken = taken;
        taken.sort_unstable();
        held.sort_unstable();
        assert_eq!(held, taken);
    }

    #[test]
    fn a_read_s_entry_holds_its_descriptor_and_count_where_the_kernel_puts_them() {
        assert_eq!(
            super::format("read"),
            "\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n"
        );
        let mut record = [0u8; 64];
        super::fill("openat", -100, 0, &mut record);
        assert_eq!(
            u64::from_le_bytes(record[16..24].try_into().unwrap()),
            4_294_967_196
        );
    }
}
