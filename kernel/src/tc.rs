//! Attaching the packet source's TC classifiers to network interfaces.
//!
//! On Linux 6.6 and later they attach as TCX links, which belong to weft's
//! file descriptors: when weft exits, even by SIGKILL, the kernel removes
//! them and nothing is left behind. Older kernels attach netlink `clsact`
//! filters, which outlive a killed process; weft removes its stale filters
//! (found by program name) from each interface before attaching.
//!
//! Without `--interface` the classifiers go on every interface that is up,
//! and on those that come up while weft runs, checked once a second.

use std::{collections::BTreeSet, fs, net::IpAddr};

use crate::error::{Context as _, Result, bail};
use aya::{
    Ebpf,
    maps::{HashMap, MapData},
    programs::{
        SchedClassifier,
        tc::{self, TcAttachType},
    },
    util::KernelVersion,
};
use weft_abi::net::{ADDRS_MAP, FILTER_ADDR, FILTER_PORT, PORTS_MAP};

use crate::clsact;

/// Where and what the packet source captures.
#[derive(Debug, Default, Clone)]
pub struct NetOptions {
    /// Interfaces to attach to; empty means every interface that is up.
    pub interfaces: Vec<String>,
    /// Only packets from or to these ports; empty means all.
    pub ports: Vec<u16>,
    /// Only packets from or to these addresses; empty means all.
    pub addrs: Vec<IpAddr>,
    /// Payload bytes kept per packet.
    pub snaplen: u32,
}

/// The classifiers, in the order of their attach types.
const PROGRAMS: [(&str, TcAttachType); 2] = [
    ("net_ingress", TcAttachType::Ingress),
    ("net_egress", TcAttachType::Egress),
];

/// `IFF_UP` in `/sys/class/net/IF/flags`.
const IFF_UP: u32 = 1;

impl NetOptions {
    /// The `NET_FILTER_FLAGS` global for these options.
    pub fn flags(&self) -> u32 {
        let mut flags = 0;
        if !self.ports.is_empty() {
            flags |= FILTER_PORT;
        }
        if !self.addrs.is_empty() {
            flags |= FILTER_ADDR;
        }
        flags
    }

    /// The interfaces to attach to: those named (which must exist), or
    /// every interface that is up.
    pub fn interfaces(&self) -> Result<Vec<String>> {
        if !self.interfaces.is_empty() {
            for name in &self.interfaces {
                if !std::path::Path::new("/sys/class/net").join(name).exists() {
                    bail!("--interface {name}: no such network interface");
                }
            }
            return Ok(self.interfaces.clone());
        }
        up_interfaces()
    }
}

/// Every network interface that is up, sorted by name.
fn up_interfaces() -> Result<Vec<String>> {
    let mut up: Vec<String> = interfaces()?.into_iter().filter(|i| is_up(i)).collect();
    up.sort();
    Ok(up)
}

/// Every network interface.
fn interfaces() -> Result<Vec<String>> {
    fs::read_dir("/sys/class/net")
        .context("failed to list /sys/class/net")?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect()
}

/// Whether network interface `name` is up.
fn is_up(name: &str) -> bool {
    let flags = fs::read_to_string(format!("/sys/class/net/{name}/flags")).unwrap_or_default();
    u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).is_ok_and(|f| f & IFF_UP != 0)
}

/// Fills the port and address filter sets.
pub fn fill_filters(ebpf: &mut Ebpf, options: &NetOptions) -> Result<()> {
    let mut ports: HashMap<&mut MapData, u16, u8> =
        HashMap::try_from(ebpf.map_mut(PORTS_MAP).context("no port filter map")?)?;
    for port in &options.ports {
        ports
            .insert(port, 1, 0)
            .context("failed to fill the port filter")?;
    }
    let mut addrs: HashMap<&mut MapData, [u8; 16], u8> =
        HashMap::try_from(ebpf.map_mut(ADDRS_MAP).context("no address filter map")?)?;
    for addr in &options.addrs {
        let key = match addr {
            IpAddr::V4(v4) => {
                let mut key = [0; 16];
                key[..4].copy_from_slice(&v4.octets());
                key
            }
            IpAddr::V6(v6) => v6.octets(),
        };
        addrs
            .insert(key, 1, 0)
            .context("failed to fill the address filter")?;
    }
    Ok(())
}

/// Whether this kernel has TCX (Linux 6.6): links owned by file
/// descriptors rather than netlink filters.
fn tcx() -> bool {
    KernelVersion::current().is_ok_and(|v| v >= KernelVersion::new(6, 6, 0))
}

/// How the classifiers attach on this kernel, for `weft doctor`.
pub fn describe_attach() -> &'static str {
    if tcx() {
        "TC through TCX links (removed by the kernel when weft exits)"
    } else {
        "TC through netlink clsact filters (needs sch_ingress and cls_bpf)"
    }
}

/// The interfaces the classifiers are on. Without `--interface`, weft
/// follows interfaces that come up after it starts too.
pub struct Attachment {
    /// Names of the interfaces attached to, in order.
    names: Vec<String>,
    /// Interface indexes tried, attached or not (an index is not reused
    /// for a new interface while the old one exists, unlike a name).
    tried: BTreeSet<u32>,
    /// Whether to attach to interfaces that come up later.
    follow: bool,
    /// Whether the kernel has TCX; before it, netlink filters on clsact.
    tcx: bool,
    /// Interfaces whose clsact qdisc weft added (before Linux 6.6).
    added_clsact: Vec<String>,
}

/// Loads the classifiers and attaches them to ingress and egress of each
/// interface `options` chooses.
pub fn attach(ebpf: &mut Ebpf, options: &NetOptions) -> Result<Attachment> {
    for (name, _) in PROGRAMS {
        let program: &mut SchedClassifier = ebpf
            .program_mut(name)
            .context("classifier missing")?
            .try_into()?;
        program
            .load()
            .with_context(|| format!("the kernel rejected {name}"))?;
    }
    let tcx = tcx();
    if !tcx {
        remove_stale_qdiscs();
    }
    let mut attachment = Attachment {
        names: Vec::new(),
        tried: BTreeSet::new(),
        follow: options.interfaces.is_empty(),
        tcx,
        added_clsact: Vec::new(),
    };
    for interface in options.interfaces()? {
        attachment.tried.extend(clsact::ifindex(&interface));
        attachment.attach(ebpf, interface)?;
    }
    Ok(attachment)
}

impl Attachment {
    /// How the classifiers are attached, for humans.
    pub fn describe(&self) -> String {
        let how = if self.tcx {
            "TCX links"
        } else {
            "clsact filters"
        };
        let later = if self.follow {
            ", and interfaces that come up later"
        } else {
            ""
        };
        format!("{how} on {}{later}", self.names.join(", "))
    }

    /// The interfaces attached to, by index and name, as they are named
    /// now: a capture keeps them, since another machine (or this one
    /// later) may name an index otherwise.
    pub fn interfaces(&self) -> Vec<(u32, String)> {
        self.names
            .iter()
            .filter_map(|name| Some((clsact::ifindex(name)?, name.clone())))
            .collect()
    }

    /// Attaches to the interfaces that came up since the last call, when
    /// following them; returns their names. An interface that cannot be
    /// attached to (gone again already) is reported and not tried again.
    pub fn attach_new(&mut self, ebpf: &mut Ebpf) -> Vec<String> {
        if !self.follow {
            return Vec::new();
        }
        let mut attached = Vec::new();
        // Once a second: one read per known interface, two per new one.
        for interface in interfaces().unwrap_or_default() {
            let new = clsact::ifindex(&interface).filter(|index| !self.tried.contains(index));
            let Some(index) = new.filter(|_| is_up(&interface)) else {
                continue;
            };
            self.tried.insert(index);
            match self.attach(ebpf, interface.clone()) {
                Ok(()) => attached.push(interface),
                Err(e) => log::warn!("weft: net: {e:#}"),
            }
        }
        attached
    }

    fn attach(&mut self, ebpf: &mut Ebpf, interface: String) -> Result<()> {
        if attach_interface(ebpf, &interface, self.tcx)? {
            if let Err(e) = clsact::mark_added(&interface) {
                log::warn!("weft: net: failed to note the clsact qdisc added to {interface}: {e}");
            }
            self.added_clsact.push(interface.clone());
        }
        self.names.push(interface);
        Ok(())
    }

    /// Detaches the classifiers (unloading drops every link), then removes
    /// the clsact qdiscs weft added, unless another program filters there.
    pub fn detach(&mut self, ebpf: &mut Ebpf) {
        for (name, _) in PROGRAMS {
            if let Some(aya::programs::Program::SchedClassifier(p)) = ebpf.program_mut(name) {
                let _ = p.unload();
            }
        }
        for interface in std::mem::take(&mut self.added_clsact) {
            if let Err(e) = clsact::remove_added(&interface) {
                log::warn!("weft: net: failed to remove the clsact qdisc of {interface}: {e}");
            }
        }
    }
}

/// Removes the filters and clsact qdiscs a killed weft left (netlink only).
fn remove_stale_qdiscs() {
    for interface in clsact::stale() {
        remove_stale_filters(&interface);
        if let Ok(true) = clsact::remove_added(&interface) {
            log::info!("weft: removed the clsact qdisc a killed weft added to {interface}");
        }
    }
}

/// Attaches both (loaded) classifiers to `interface`; returns whether weft
/// added a clsact qdisc for them (never with `tcx`).
fn attach_interface(ebpf: &mut Ebpf, interface: &str, tcx: bool) -> Result<bool> {
    // Already present is fine (another tool may use clsact too), so an
    // error here only explains a failed attach below.
    let clsact = if tcx {
        Ok(())
    } else {
        remove_stale_filters(interface);
        tc::qdisc_add_clsact(interface)
    };
    for (name, attach_type) in PROGRAMS {
        let program: &mut SchedClassifier = ebpf
            .program_mut(name)
            .context("classifier missing")?
            .try_into()?;
        program.attach(interface, attach_type).with_context(|| {
            let qdisc = clsact
                .as_ref()
                .err()
                .map_or_else(String::new, |e| format!("; adding the clsact qdisc said: {e}"));
            format!(
                "failed to attach {name} to {interface} ({attach_type:?}); before Linux 6.6 TC needs \
                 the clsact qdisc (sch_ingress) and the BPF classifier (cls_bpf){qdisc}"
            )
        })?;
    }
    Ok(!tcx && clsact.is_ok())
}

/// Removes the filters a killed weft left on `interface` (netlink only).
fn remove_stale_filters(interface: &str) {
    for (name, attach_type) in PROGRAMS {
        if tc::qdisc_detach_program(interface, attach_type, name).is_ok() {
            log::warn!(
                "weft: removed a stale {name} filter from {interface} (a weft that was killed)"
            );
        }
    }
}
