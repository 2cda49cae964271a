//! The running kernel as the one-liner checker sees it: tracepoints and
//! their formats from tracefs, traceable functions, kprobe support.

use std::{
    cell::OnceCell,
    fs,
    path::{Path, PathBuf},
};

use weft_oneliner::kernel::{Field, Member, Shape, Signature, UsdtSite, format_fields, glob_match};

use super::btf::Btf;
use crate::ebpf;

pub struct Kernel {
    tracefs: PathBuf,
    /// Traceable kernel functions, read on first use (the list is large).
    functions: OnceCell<Vec<String>>,
    /// The kernel's BTF, read on first use.
    btf: OnceCell<Result<Btf, String>>,
}

impl Kernel {
    pub fn new(tracefs: &Path) -> Self {
        Self {
            tracefs: tracefs.to_path_buf(),
            functions: OnceCell::new(),
            btf: OnceCell::new(),
        }
    }

    /// The functions fentry and fexit attach to, `(module, function)`
    /// (`vmlinux` for the kernel's own): those of the BTF the kernel
    /// traces, as bpftrace's `-l kfunc:*` lists them, which leaves out
    /// those of more than six parameters.
    pub fn fentry_functions(&self) -> Result<Vec<(String, String)>, String> {
        use weft_oneliner::Kernel as _;
        let traceable: std::collections::HashSet<String> =
            self.functions("*").into_iter().collect();
        let btf = self.btf()?;
        Ok((btf.functions())
            .filter(|(_, function)| traceable.contains(*function))
            .filter(|(_, function)| btf.function(function).is_some_and(|f| f.args.len() <= 6))
            .map(|(module, function)| (module.to_owned(), function.to_owned()))
            .collect())
    }

    /// `function`'s parameters and return as C declares them, a line
    /// each (`struct file * file`, `ssize_t retval`).
    pub fn declarations(&self, function: &str) -> Option<Vec<String>> {
        self.btf().ok()?.declarations(function)
    }

    /// Subdirectories of `dir` whose names match `glob`, sorted.
    fn matching_dirs(dir: &Path, glob: &str) -> Vec<String> {
        // A plain name needs no listing: tracefs directories hold hundreds
        // of entries, and start-up time counts for one-liners.
        if !glob.contains(['*', '?']) {
            return if dir.join(glob).is_dir() {
                vec![glob.to_string()]
            } else {
                Vec::new()
            };
        }
        let mut names: Vec<String> = fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            // The type comes with the listing, without a stat per entry.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| glob_match(glob, name))
            .collect();
        names.sort();
        names
    }
}

impl weft_oneliner::Kernel for Kernel {
    fn usdt(&self, path: &str) -> Result<(String, Vec<UsdtSite>), String> {
        let file = super::files::uprobe_file(path).map_err(|e| format!("{e:#}"))?;
        let probes = super::files::usdt_probes(&file).map_err(|e| format!("{e:#}"))?;
        if probes.is_empty() {
            return Err(format!(
                "{} has no USDT probes (no .note.stapsdt section)",
                file.display()
            ));
        }
        let sites = probes
            .into_iter()
            .map(|p| UsdtSite {
                provider: p.provider,
                name: p.name,
                args: p.args,
                offset: p.offset,
                semaphore: p.semaphore,
            })
            .collect();
        Ok((file.display().to_string(), sites))
    }

    fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>), String> {
        let file = super::files::uprobe_file(path).map_err(|e| format!("{e:#}"))?;
        let names = super::files::functions(&file).map_err(|e| format!("{e:#}"))?;
        Ok((file.display().to_string(), names))
    }

    fn user_object(&self, path: &str, name: &str) -> Result<Option<(u64, u64)>, String> {
        let file = super::files::uprobe_file(path).map_err(|e| format!("{e:#}"))?;
        super::files::object(&file, name).map_err(|e| format!("{e:#}"))
    }

    fn uprobe_parameters(
        &self,
        path: &str,
        function: &str,
    ) -> Result<Option<weft_oneliner::UserFunction>, String> {
        let file = super::files::uprobe_file(path).map_err(|e| format!("{e:#}"))?;
        super::dwarf::parameters(&file, function).map_err(|e| format!("{e:#}"))
    }

    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
        let events = self.tracefs.join("events");
        Self::matching_dirs(&events, category)
            .into_iter()
            .flat_map(|c| {
                let dir = events.join(&c);
                Self::matching_dirs(&dir, name)
                    .into_iter()
                    .filter(move |n| dir.join(n).join("format").exists())
                    .map(move |n| (c.clone(), n))
            })
            .collect()
    }

    fn tracepoint_fields(&self, category: &str, name: &str) -> Result<Vec<Field>, String> {
        ebpf::read_tracepoint_format(&self.tracefs, category, name)
            .map(|text| format_fields(&text))
            .map_err(|e| format!("{e:#}"))
    }

    fn has_raw_tracepoint(&self, name: &str) -> bool {
        !self.tracepoints("*", name).is_empty()
    }

    fn has_kprobes(&self) -> bool {
        self.tracefs.join("kprobe_events").exists()
    }

    fn functions(&self, glob: &str) -> Vec<String> {
        let all = self.functions.get_or_init(|| {
            // The traceable functions; where tracefs keeps them from us
            // (lockdown, no function tracer), the text symbols of kallsyms.
            let names: Vec<String> =
                match fs::read_to_string(self.tracefs.join("available_filter_functions")) {
                    Ok(text) => text
                        .lines()
                        .filter_map(|line| line.split_whitespace().next())
                        .map(str::to_string)
                        .collect(),
                    Err(_) => fs::read_to_string("/proc/kallsyms")
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|line| {
                            let mut words = line.split_whitespace().skip(1);
                            let kind = words.next()?;
                            let name = words.next()?;
                            matches!(kind, "t" | "T").then(|| name.to_string())
                        })
                        .collect(),
                };
            let mut names = names;
            names.sort();
            names.dedup();
            names
        });
        all.iter()
            .filter(|f| glob_match(glob, f))
            .cloned()
            .collect()
    }

    fn function(&self, function: &str) -> Result<Signature, String> {
        let btf = self.btf()?;
        btf.function(function)
            .ok_or_else(|| format!("the kernel's BTF has no function `{function}`"))
    }

    fn record(&self, name: &str) -> Result<u32, String> {
        self.btf()?
            .record(name)
            .ok_or_else(|| format!("the kernel's BTF has no `{name}`"))
    }

    fn record_name(&self, record: u32) -> String {
        self.btf()
            .map(|btf| btf.record_name(record))
            .unwrap_or_default()
    }

    fn record_size(&self, record: u32) -> u32 {
        self.btf().map_or(0, |btf| btf.record_size(record))
    }

    fn member(&self, record: u32, name: &str) -> Result<Member, String> {
        self.btf()?.member(record, name)
    }

    fn pointee_int(&self, record: u32, name: &str) -> Option<(u16, bool)> {
        self.btf().ok()?.pointee_int(record, name)
    }

    fn member_names(&self, record: u32) -> Vec<String> {
        self.btf()
            .map(|btf| btf.member_names(record))
            .unwrap_or_default()
    }

    fn paths(&self, pattern: &str) -> Vec<String> {
        super::files::glob_paths(pattern)
    }

    fn process_files(&self, pid: u32) -> Result<Vec<String>, String> {
        let maps = format!("/proc/{pid}/maps");
        let text = std::fs::read_to_string(&maps).map_err(|e| format!("{maps}: {e}"))?;
        let mappings = weft_symbols::executable_mappings(&text).map_err(|e| e.to_string())?;
        // Through the process's root, as its stacks are named: a path in
        // another mount namespace names another file in ours.
        let mut files: Vec<String> = Vec::new();
        for mapping in mappings {
            let file = format!("/proc/{pid}/root{}", mapping.path);
            if !files.contains(&file) {
                files.push(file);
            }
        }
        Ok(files)
    }

    fn record_align(&self, record: u32) -> u32 {
        self.btf().map_or(1, |btf| btf.record_align(record))
    }

    fn typedef(&self, name: &str) -> Option<Shape> {
        self.btf().ok()?.typedef(name)
    }

    fn enumerator(&self, name: &str) -> Option<i64> {
        self.btf().ok()?.enumerator(name)
    }

    fn cgroup_id(&self, path: &str) -> Result<u64, String> {
        use std::os::unix::fs::MetadataExt as _;
        /// `CGROUP2_SUPER_MAGIC` of `linux/magic.h`.
        const CGROUP2: libc::c_long = 0x6367_7270;
        let c_path = std::ffi::CString::new(path).map_err(|_| "a NUL byte".to_string())?;
        // SAFETY: statfs is plain integers, for which zero is valid.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path, and a statfs for the call to fill.
        if unsafe { libc::statfs(c_path.as_ptr(), &raw mut fs) } != 0 {
            return Err(format!("{path}: {}", std::io::Error::last_os_error()));
        }
        let metadata = fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
        if fs.f_type != CGROUP2 || !metadata.is_dir() {
            return Err(format!(
                "{path} is not a cgroup v2 directory (mount -t cgroup2 none DIR)"
            ));
        }
        // A kernfs directory's inode number is its node's id, the id the
        // kernel gives the cgroup (`bpf_get_current_cgroup_id`).
        Ok(metadata.ino())
    }

    fn symbol(&self, name: &str) -> Option<u64> {
        // Data symbols too (`avenrun`), where the kernel lists them
        // (CONFIG_KALLSYMS_ALL).
        fs::read_to_string("/proc/kallsyms")
            .ok()?
            .lines()
            .find_map(|line| {
                let mut words = line.split_whitespace();
                let address = words.next()?;
                (words.nth(1)? == name).then(|| u64::from_str_radix(address, 16).ok())?
            })
            .filter(|address| *address != 0)
    }
}

impl Kernel {
    fn btf(&self) -> Result<&Btf, String> {
        self.btf
            .get_or_init(Btf::read)
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The event id of a tracepoint (the `ID:` line of its format), which its
/// records carry as `common_type`.
pub fn event_id(tracefs: &Path, category: &str, name: &str) -> crate::error::Result<u32> {
    let text = ebpf::read_tracepoint_format(tracefs, category, name)?;
    text.lines()
        .find_map(|l| l.strip_prefix("ID:"))
        .and_then(|id| id.trim().parse().ok())
        .ok_or_else(|| {
            crate::error::Error::Missing(format!(
                "tracepoint {category}:{name}: its format has no ID line"
            ))
        })
}
