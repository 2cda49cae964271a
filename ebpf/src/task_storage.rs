//! A BTF task-local storage map (`BPF_MAP_TYPE_TASK_STORAGE`), which aya-ebpf
//! 0.2.1 lacks. Task storage lives in the `task_struct`, so a lookup is a
//! short walk of the task's own storage list (usually a cache hit) instead of
//! a hash of the thread id, and the kernel frees it when the task exits.
//!
//! # Minimum kernel version
//!
//! 5.11 (task storage from tracing programs, `bpf_get_current_task_btf`).

use core::ptr;

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_LOCAL_STORAGE_GET_F_CREATE, bpf_map_type},
    helpers::generated::{bpf_get_current_task_btf, bpf_task_storage_get},
};

/// The layout the loader reads from BTF: each field's array length encodes a
/// map attribute, as in libbpf's `__uint`/`__type` macros.
#[repr(C)]
pub struct TaskStorage<T> {
    r#type: *const [i32; bpf_map_type::BPF_MAP_TYPE_TASK_STORAGE as usize],
    key: *const i32,
    value: *const T,
    max_entries: *const [i32; 0],
    map_flags: *const [i32; BPF_F_NO_PREALLOC as usize],
}

// SAFETY: the fields are never dereferenced; only the static's address is
// passed to helpers, and the kernel synchronises access.
unsafe impl<T> Sync for TaskStorage<T> {}

impl<T> TaskStorage<T> {
    /// A definition for `#[btf_map]`; the loader creates the real map.
    pub const fn new() -> Self {
        Self {
            r#type: ptr::null(),
            key: ptr::null(),
            value: ptr::null(),
            max_entries: ptr::null(),
            map_flags: ptr::null(),
        }
    }

    /// The current task's value, created zeroed when `create` is set and
    /// none exists. `None` if absent (or if creating it failed).
    #[inline(always)]
    pub fn current(&self, create: bool) -> Option<*mut T> {
        let flags = if create {
            u64::from(BPF_LOCAL_STORAGE_GET_F_CREATE)
        } else {
            0
        };
        // SAFETY: the map pointer is this static; the task pointer comes from
        // the helper and is trusted by the verifier; a NULL init value means
        // "zero-initialise".
        let value = unsafe {
            bpf_task_storage_get(
                ptr::from_ref(self).cast_mut().cast(),
                bpf_get_current_task_btf(),
                ptr::null_mut(),
                flags,
            )
        };
        (!value.is_null()).then_some(value.cast())
    }
}
