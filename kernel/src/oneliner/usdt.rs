//! The perf event of a USDT probe site: a uprobe at the site that also
//! counts the probe's semaphore (`ref_ctr_offset`, Linux 4.20). A program
//! tests its semaphore before it evaluates a probe's arguments (Python's
//! and the JVM's probes do), so without the count the site never runs. The
//! kernel counts it in every process that maps the file, running or
//! started later, for as long as the event is open.

use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::Path, sync::Arc};

use crate::error::{Context as _, Error, Result};
use perf_event::events::{Event, EventData};
use perf_event_open_sys::bindings::perf_event_attr;

/// Where the kernel reads the semaphore's offset: bits 32-63 of `config`
/// (`/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset`).
const REF_CTR_SHIFT: u32 = 32;

pub struct Usdt {
    pmu: u32,
    path: CString,
    offset: u64,
    semaphore: u64,
}

impl Usdt {
    /// The site at `offset` in the file at `path`, counting the
    /// semaphore at `semaphore` (0: none).
    pub fn new(path: &str, offset: u64, semaphore: u64) -> Result<Self> {
        let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
            .context("the uprobe PMU is missing (/sys/bus/event_source/devices/uprobe/type)")?;
        Ok(Self {
            pmu: (pmu.trim().parse().ok()).context("the uprobe PMU's type is not a number")?,
            path: CString::new(Path::new(path).as_os_str().as_bytes())
                .map_err(|_| Error::Invalid(format!("usdt: {path:?} holds a NUL byte")))?,
            offset,
            semaphore,
        })
    }
}

impl Event for Usdt {
    fn update_attrs(self, _: &mut perf_event_attr) {
        unreachable!("Builder calls update_attrs_with_data")
    }

    fn update_attrs_with_data(self, attr: &mut perf_event_attr) -> Option<Arc<dyn EventData>> {
        attr.type_ = self.pmu;
        attr.config = self.semaphore << REF_CTR_SHIFT;
        attr.kprobe_func = self.path.as_ptr() as u64;
        attr.probe_offset = self.offset;
        // The path must live until the event is opened.
        Some(Arc::new(self.path))
    }
}
