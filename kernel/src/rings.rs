//! The per-CPU ring buffers every probe writes into, and the ring array
//! (a map-of-maps) that holds them, made before the object loads so that
//! start-up does not wait for them (see [`RingArray`]).

use std::{
    ffi::CStr,
    fs,
    os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU32, Ordering},
    thread::JoinHandle,
    time::Duration,
};

use crate::error::{Context as _, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{Map, MapData},
};
use weft_abi::ring::Ring;

use crate::ebpf::{bpf, mount};

/// Creates one ring of `bytes` per CPU and maps it into weft's memory.
/// The kernel allocates and clears every page at creation, and maps every
/// page at once, so the rings are made in parallel threads.
fn new_rings(cpus: u32, bytes: u32) -> Result<Vec<Ring>> {
    let create = move |cpu: u32| {
        let params = aya_obj::Map::new_from_params(
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
            0,
            0,
            bytes,
            0,
        );
        let ring = MapData::create(params, "weft_ring", None).with_context(|| {
            format!("failed to create a {bytes}-byte ring buffer for CPU {cpu}")
        })?;
        let fd = ring.fd().as_fd().try_clone_to_owned()?;
        Ring::map(fd, bytes as usize)
            .with_context(|| format!("failed to map the ring buffer of CPU {cpu}"))
    };
    std::thread::scope(|scope| {
        let made: Vec<_> = (0..cpus)
            .map(|cpu| scope.spawn(move || create(cpu)))
            .collect();
        made.into_iter()
            .map(|ring| ring.join().expect("a ring thread does not panic"))
            .collect()
    })
}

/// The ring array `map` of `ebpf`.
fn ring_array<'a>(ebpf: &'a Ebpf, map: &str) -> Result<&'a MapData> {
    let outer = ebpf.map(map).context("the probe has no ring array")?;
    let Map::ArrayOfMaps(outer) = outer else {
        bail!("{map} is not an array of maps");
    };
    Ok(outer)
}

/// Puts the maps `rings` into slots 0, 1, ... of the map-of-maps `outer`.
///
/// Each update of a map-of-maps waits for an RCU grace period in the
/// kernel (milliseconds each), so the updates run in parallel threads and
/// share grace periods instead of paying one per CPU in turn.
fn fill_ring_array(outer: impl AsFd, rings: &[impl AsFd + Sync]) -> Result<()> {
    let outer = outer.as_fd().as_raw_fd();
    std::thread::scope(|scope| {
        let updates: Vec<_> = rings
            .iter()
            .zip(0u32..)
            .map(|(ring, cpu)| {
                let ring = ring.as_fd().as_raw_fd();
                scope.spawn(move || update_fd_slot(outer, cpu, ring))
            })
            .collect();
        updates
            .into_iter()
            .try_for_each(|u| u.join().expect("an update thread does not panic"))
    })
    .context("failed to install a ring buffer")
}

/// Where bpffs is mounted (weft mounts it when absent), for pins that live
/// only while weft loads.
const BPFFS: &CStr = c"/sys/fs/bpf";
/// Names of [`RingArray`] pins: this prefix, the pid, `-` and a number.
const RING_PIN_PREFIX: &str = "weft-rings-";

/// Per-CPU rings in a ring array made before the object loads.
///
/// Filling a map-of-maps waits for RCU grace periods (milliseconds), which
/// would add to the start-up time after the load. So the array is made
/// and pinned in bpffs first, the loader takes the pinned array as the
/// object's (`EbpfLoader::map_pin_path`), and the array is filled while
/// the object loads. Without bpffs the rings are plugged in after the
/// load.
pub struct RingArray {
    rings: Rings,
    /// The array's pin, while it exists.
    pin: Option<PathBuf>,
}

enum Rings {
    /// In the pinned array `outer`, where the thread `filling` puts them.
    Filling {
        rings: Vec<Ring>,
        outer: MapData,
        filling: JoinHandle<Result<()>>,
    },
    /// Not in any array yet: no bpffs.
    Loose(Vec<Ring>),
}

/// A [`RingArray`] being made on a thread of its own, while the caller
/// makes its loader.
pub struct Making(Option<JoinHandle<Result<RingArray>>>);

impl Making {
    pub fn wait(mut self) -> Result<RingArray> {
        let thread = self.0.take().expect("waited for once");
        thread.join().expect("the ring thread does not panic")
    }
}

impl Drop for Making {
    /// A caller that gives up (a program with an error, say) waits for
    /// the array all the same, so that dropping it removes its pin before
    /// weft exits and kills the thread.
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

impl RingArray {
    /// Starts making `cpus` rings of `bytes` (see [`RingArray::create`]).
    pub fn spawn(cpus: u32, bytes: u32) -> Making {
        Making(Some(std::thread::spawn(move || Self::create(cpus, bytes))))
    }

    /// Creates `cpus` rings of `bytes` and, where bpffs is mounted, the
    /// array holding them.
    fn create(cpus: u32, bytes: u32) -> Result<Self> {
        // Unique among the arrays of this process, which may load several
        // objects at once.
        static ARRAYS: AtomicU32 = AtomicU32::new(0);
        let rings = new_rings(cpus, bytes)?;
        remove_stale_ring_pins();
        let pin = bpffs_dir().join(format!(
            "{RING_PIN_PREFIX}{}-{}",
            std::process::id(),
            ARRAYS.fetch_add(1, Ordering::Relaxed)
        ));
        let outer = bpffs()
            .then(|| pinned_ring_array(&rings, &pin).ok())
            .flatten();
        let Some(outer) = outer else {
            return Ok(Self {
                rings: Rings::Loose(rings),
                pin: None,
            });
        };
        // The thread holds its own fds, whatever becomes of the rings.
        let outer_fd = outer.fd().as_fd().try_clone_to_owned()?;
        let ring_fds = rings
            .iter()
            .map(|ring| fd_of(ring).try_clone_to_owned())
            .collect::<std::io::Result<Vec<OwnedFd>>>()?;
        let filling = std::thread::spawn(move || fill_ring_array(outer_fd, &ring_fds));
        Ok(Self {
            rings: Rings::Filling {
                rings,
                outer,
                filling,
            },
            pin: Some(pin),
        })
    }

    /// Has `loader` take the array as map `name` of the object.
    pub fn use_in<'a>(&self, loader: &mut EbpfLoader<'a>, name: &'a str) {
        if let Some(pin) = &self.pin {
            loader.map_pin_path(name, pin.clone());
        }
    }

    /// The rings, in the array, once `ebpf` is loaded after
    /// [`use_in`](Self::use_in).
    pub fn finish(mut self, ebpf: &Ebpf, name: &str) -> Result<Vec<Ring>> {
        match std::mem::replace(&mut self.rings, Rings::Loose(Vec::new())) {
            Rings::Filling {
                rings,
                outer,
                filling,
            } => {
                let object = ring_array(ebpf, name)?;
                if object.info()?.id() != outer.info()?.id() {
                    // The loader made its own array (the pin was gone when
                    // it looked, removed by another pid namespace's weft,
                    // say): fill that one.
                    fill_ring_array(object.fd(), &fds(&rings))?;
                    return Ok(rings);
                }
                let outer = outer.fd().as_fd().as_raw_fd();
                let slots = u32::try_from(rings.len()).expect("a ring per CPU");
                // An update sets its slot as it enters the kernel; the grace
                // period it then waits out guards the slot's old value, and
                // there was none. So the rings are in place once every slot
                // reads back set, while the updates may still wait (the
                // thread ends on its own).
                while !(0..slots).all(|slot| slot_is_set(outer, slot)) {
                    if filling.is_finished() {
                        filling.join().expect("the fill thread does not panic")?;
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(rings)
            }
            Rings::Loose(rings) => {
                fill_ring_array(ring_array(ebpf, name)?.fd(), &fds(&rings))?;
                Ok(rings)
            }
        }
    }
}

/// The map of a ring made by [`new_rings`].
fn fd_of(ring: &Ring) -> BorrowedFd<'_> {
    ring.fd().expect("a kernel ring has its map's fd")
}

/// The maps of `rings`.
fn fds(rings: &[Ring]) -> Vec<BorrowedFd<'_>> {
    rings.iter().map(fd_of).collect()
}

impl Drop for RingArray {
    /// Unpins the array: the loaded object holds it by then, or nothing
    /// should.
    fn drop(&mut self) {
        if let Some(pin) = self.pin.take() {
            let _ = fs::remove_file(pin);
        }
    }
}

/// Makes an empty ring array for `rings` and pins it at `path`.
fn pinned_ring_array(rings: &[Ring], path: &Path) -> Result<MapData> {
    /// The leading part of `union bpf_attr` for `BPF_MAP_CREATE`.
    #[repr(C)]
    struct MapCreate {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
        inner_map_fd: u32,
        numa_node: u32,
        map_name: [u8; 16],
    }
    const BPF_MAP_CREATE: libc::c_long = 0;
    let template = rings.first().context("no rings")?;
    let mut attr = MapCreate {
        map_type: aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_ARRAY_OF_MAPS as u32,
        key_size: 4,
        value_size: 4,
        max_entries: u32::try_from(rings.len()).expect("a ring per CPU"),
        map_flags: 0,
        inner_map_fd: fd_of(template).as_raw_fd().cast_unsigned(),
        numa_node: 0,
        map_name: *b"weft_rings\0\0\0\0\0\0",
    };
    let fd = bpf(BPF_MAP_CREATE, &mut attr).context("failed to create a ring array")?;
    // SAFETY: the syscall returned a new file descriptor that nothing else owns.
    let outer = MapData::from_fd(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })?;
    outer.pin(path)?;
    Ok(outer)
}

/// Removes ring array pins of weft processes that are gone (killed while
/// loading), each holding its rings' memory.
fn remove_stale_ring_pins() {
    let Ok(entries) = fs::read_dir(bpffs_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, _)) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RING_PIN_PREFIX))
            .and_then(|n| n.split_once('-'))
        else {
            continue;
        };
        // A pin lives for milliseconds: one a minute old whose pid is not
        // here is stale (a pid of another pid namespace may be loading).
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > Duration::from_secs(60)));
        if old && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Whether bpffs is mounted on [`BPFFS`], mounting it when absent.
fn bpffs() -> bool {
    const BPF_FS_MAGIC: libc::c_long = 0xcafe_4a11;
    let is_bpffs = || {
        // SAFETY: an all-zero statfs is valid.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: the path is NUL-terminated; statfs only writes `fs`.
        let rc = unsafe { libc::statfs(BPFFS.as_ptr(), &raw mut fs) };
        rc == 0 && fs.f_type == BPF_FS_MAGIC
    };
    // Root's only, as systemd mounts it: bpffs is otherwise 1777, and weft
    // pins its ring arrays there while it loads.
    is_bpffs() || (mount(c"bpf", BPFFS, Some(c"mode=0700")).is_ok() && is_bpffs())
}

fn bpffs_dir() -> &'static Path {
    Path::new(BPFFS.to_str().expect("an ASCII path"))
}

/// Whether slot `key` of the map-of-maps `map_fd` holds a map (a lookup
/// from user space reads back the inner map's id).
fn slot_is_set(map_fd: RawFd, key: u32) -> bool {
    const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
    let mut id = 0u32;
    bpf(BPF_MAP_LOOKUP_ELEM, &mut elem(map_fd, &key, &raw mut id)).is_ok()
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` of slot `key` of map-of-maps `map_fd` to the
/// map `inner_fd`.
fn update_fd_slot(map_fd: RawFd, key: u32, inner_fd: RawFd) -> std::io::Result<()> {
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    let value = inner_fd.cast_unsigned();
    bpf(
        BPF_MAP_UPDATE_ELEM,
        &mut elem(map_fd, &key, &raw const value),
    )
    .map(drop)
}

/// `union bpf_attr` for the element commands.
#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The element command attributes for `key` and `value` of `map_fd`.
fn elem(map_fd: RawFd, key: &u32, value: *const u32) -> ElemAttr {
    ElemAttr {
        map_fd: map_fd.cast_unsigned(),
        pad: 0,
        key: std::ptr::from_ref(key) as u64,
        value: value as u64,
        flags: 0,
    }
}
