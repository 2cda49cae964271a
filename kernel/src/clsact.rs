//! The `clsact` qdiscs weft adds before Linux 6.6, where TC classifiers are
//! netlink filters on one: weft removes each qdisc it added once no filter
//! is left on it, at exit, or at the next start after it was killed.
//!
//! A qdisc weft added is marked by a file `/run/weft/clsact-IFNAME` holding
//! weft's pid. A mark whose process is gone is stale: the next weft with
//! the packet source removes that weft's filters (by program name) from the
//! interface, then the qdisc if nothing else filters there.

use std::{
    fs,
    io::{self, Write as _},
    mem::size_of,
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
        unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    },
    path::PathBuf,
};

/// Where the marks are.
const DIR: &str = "/run/weft";
/// A mark's name: this prefix and the interface's.
const PREFIX: &str = "clsact-";

/// `TC_H_CLSACT`, the clsact qdisc's parent, and its handle.
const TC_H_CLSACT: u32 = 0xffff_fff1;
const CLSACT_HANDLE: u32 = 0xffff_0000;
/// The clsact qdisc's ingress and egress filter parents.
const INGRESS_PARENT: u32 = 0xffff_fff2;
const EGRESS_PARENT: u32 = 0xffff_fff3;

fn mark(interface: &str) -> PathBuf {
    PathBuf::from(DIR).join(format!("{PREFIX}{interface}"))
}

/// Marks the clsact qdisc of `interface` as added by this weft.
pub fn mark_added(interface: &str) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(DIR)?;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(mark(interface))?
        .write_all(std::process::id().to_string().as_bytes())
}

/// Removes the clsact qdisc this weft added to `interface`, unless another
/// program still filters there; the mark goes either way.
pub fn remove_added(interface: &str) -> io::Result<bool> {
    let removed = remove_if_unused(interface);
    fs::remove_file(mark(interface))?;
    removed
}

/// Interfaces whose clsact qdisc a killed weft added (its mark is stale).
pub fn stale() -> Vec<String> {
    let Ok(entries) = fs::read_dir(DIR) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let interface = name.strip_prefix(PREFIX)?.to_string();
            let pid = fs::read_to_string(entry.path()).ok()?;
            let alive = PathBuf::from("/proc").join(pid.trim()).exists();
            (!alive).then_some(interface)
        })
        .collect()
}

/// The index of network interface `name`, while it exists.
pub fn ifindex(name: &str) -> Option<u32> {
    fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Deletes the clsact qdisc of `interface` when no filter is left on it;
/// returns whether it did. A vanished interface has nothing to delete.
fn remove_if_unused(interface: &str) -> io::Result<bool> {
    let Some(index) = ifindex(interface) else {
        return Ok(false);
    };
    let socket = Netlink::open()?;
    for parent in [INGRESS_PARENT, EGRESS_PARENT] {
        if socket.has_filters(index, parent)? {
            return Ok(false);
        }
    }
    socket.delete_clsact(index)?;
    Ok(true)
}

/// `struct tcmsg`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TcMsg {
    family: u8,
    pad1: u8,
    pad2: u16,
    ifindex: i32,
    handle: u32,
    parent: u32,
    info: u32,
}

/// A netlink request: header and tcmsg, no attributes.
#[repr(C)]
struct Request {
    header: libc::nlmsghdr,
    tc: TcMsg,
}

/// A `NETLINK_ROUTE` socket.
struct Netlink(OwnedFd);

impl Netlink {
    fn open() -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd that nothing else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Sends a request of `kind` with `flags` about `tc`.
    fn send(&self, kind: u16, flags: u16, tc: TcMsg) -> io::Result<()> {
        let request = Request {
            header: libc::nlmsghdr {
                nlmsg_len: size_of::<Request>() as u32,
                nlmsg_type: kind,
                nlmsg_flags: flags | libc::NLM_F_REQUEST as u16,
                nlmsg_seq: 1,
                nlmsg_pid: 0,
            },
            tc,
        };
        // SAFETY: sends the bytes of a plain repr(C) struct.
        let sent = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                (&raw const request).cast(),
                size_of::<Request>(),
                0,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the answer to the last request: calls `on_message` with the
    /// type of each message until the end of a dump or an acknowledgement;
    /// a netlink error becomes an `Err`.
    fn answer(&self, mut on_message: impl FnMut(u16)) -> io::Result<()> {
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: receives into `buffer`, which is that long.
            let len = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            };
            let len = usize::try_from(len).map_err(|_| io::Error::last_os_error())?;
            let mut at = 0;
            while at + size_of::<libc::nlmsghdr>() <= len {
                // SAFETY: a whole header lies at `at` (checked above).
                let header: libc::nlmsghdr =
                    unsafe { std::ptr::read_unaligned(buffer[at..].as_ptr().cast()) };
                match i32::from(header.nlmsg_type) {
                    libc::NLMSG_DONE => return Ok(()),
                    libc::NLMSG_ERROR => {
                        let code_at = at + size_of::<libc::nlmsghdr>();
                        let code = buffer
                            .get(code_at..code_at + 4)
                            .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        return match code {
                            0 => Ok(()),
                            code => Err(io::Error::from_raw_os_error(-code)),
                        };
                    }
                    _ => on_message(header.nlmsg_type),
                }
                // Messages are 4-byte aligned.
                at += (header.nlmsg_len as usize).next_multiple_of(4).max(1);
            }
        }
    }

    /// Whether any filter sits on `parent` of interface `index`.
    fn has_filters(&self, index: u32, parent: u32) -> io::Result<bool> {
        self.send(
            libc::RTM_GETTFILTER,
            libc::NLM_F_DUMP as u16,
            tc_msg(index, 0, parent),
        )?;
        let mut filters = false;
        self.answer(|kind| filters |= kind == libc::RTM_NEWTFILTER)?;
        Ok(filters)
    }

    /// Deletes the clsact qdisc of interface `index`.
    fn delete_clsact(&self, index: u32) -> io::Result<()> {
        self.send(
            libc::RTM_DELQDISC,
            libc::NLM_F_ACK as u16,
            tc_msg(index, CLSACT_HANDLE, TC_H_CLSACT),
        )?;
        self.answer(|_| {})
    }
}

fn tc_msg(index: u32, handle: u32, parent: u32) -> TcMsg {
    TcMsg {
        family: libc::AF_UNSPEC as u8,
        pad1: 0,
        pad2: 0,
        ifindex: index.cast_signed(),
        handle,
        parent,
        info: 0,
    }
}
