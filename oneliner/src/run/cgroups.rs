//! `cgroup_path(id [, filter])`: where a cgroup is, in every cgroup
//! hierarchy mounted, as bpftrace 0.17 resolves it. Each cgroup file system
//! of `/proc/mounts` is a hierarchy, named `unified` for cgroup2 and after
//! its mount point's directory for cgroup v1 (`blkio`, `cpu`, ...); the
//! cgroup is the entry whose inode number is the id (the root's is 1 in
//! each). bpftrace compares every entry, files too, so in a v1 hierarchy a
//! file whose inode number happens to equal a cgroup2 id answers for it
//! (`memory:/x/memory.failcnt`); weft answers as bpftrace does. The answer
//! lists `name:path` for each hierarchy holding it, `unified` first and the
//! others by name, joined by `,`; `filter`, a glob, keeps the hierarchies
//! whose names it matches.

use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use crate::kernel::glob_match;

/// Entries looked at per hierarchy, at most: cgroup trees are small (a
/// few dozen files per cgroup), and a walk is bounded whatever the machine
/// holds.
const MAX_ENTRIES: usize = 1_000_000;
/// Answers kept, at most: cgroups come and go (a container per job), and
/// the cache starts over rather than grow with them.
const MAX_KEPT: usize = 4096;

/// The paths of cgroup `id` in the hierarchies `filter` names.
pub(crate) fn cgroup_path(id: u64, filter: &str) -> String {
    static FOUND: Mutex<Option<HashMap<(u64, String), String>>> = Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(PoisonError::into_inner);
    let found = found.get_or_insert_with(HashMap::new);
    if let Some(known) = found.get(&(id, filter.to_owned())) {
        return known.clone();
    }
    let mut roots: Vec<(String, PathBuf)> = hierarchies()
        .into_iter()
        .filter(|(name, _)| glob_match(filter, name))
        .collect();
    // `unified` first, then by name.
    roots.sort_by(|a, b| (a.0 != "unified", &a.0).cmp(&(b.0 != "unified", &b.0)));
    let paths: Vec<String> = roots
        .iter()
        .filter_map(|(name, root)| Some(format!("{name}:{}", path_in(root, id)?)))
        .collect();
    let answer = paths.join(",");
    if found.len() >= MAX_KEPT {
        found.clear();
    }
    found.insert((id, filter.to_owned()), answer.clone());
    answer
}

/// Where the cgroup2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` beside v1 hierarchies), if it is.
pub fn cgroup2_root() -> Option<PathBuf> {
    hierarchies()
        .into_iter()
        .find_map(|(name, point)| (name == "unified").then_some(point))
}

/// The cgroup hierarchies mounted, each with its name and mount point, by
/// file system type (the device field is free text: `mount -t cgroup2
/// none DIR`).
fn hierarchies() -> Vec<(String, PathBuf)> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            let (point, kind) = (PathBuf::from(fields.next()?), fields.next()?);
            let name = match kind {
                "cgroup2" => "unified".to_owned(),
                "cgroup" => point.file_name()?.to_string_lossy().into_owned(),
                _ => return None,
            };
            Some((name, point))
        })
        .collect()
}

/// Where in the hierarchy at `root` the directory with inode `id` is,
/// `/` for the root itself.
fn path_in(root: &Path, id: u64) -> Option<String> {
    if std::fs::metadata(root).ok()?.ino() == id {
        return Some("/".into());
    }
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            // Never a link: a cgroup tree has none, and weft runs as root.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            seen += 1;
            if seen > MAX_ENTRIES {
                return None;
            }
            let path = entry.path();
            if entry.metadata().is_ok_and(|m| m.ino() == id) {
                let inside = path.strip_prefix(root).ok()?;
                return Some(format!("/{}", inside.display()));
            }
            if kind.is_dir() {
                stack.push(path);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own cgroup, as `/proc/self/cgroup` names it.
    #[test]
    fn names_this_process_s_cgroup() {
        let Some((_, root)) = hierarchies().into_iter().find(|(n, _)| n == "unified") else {
            eprintln!("skipping: no cgroup2 hierarchy is mounted here");
            return;
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(own) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
            return;
        };
        let dir = root.join(own.trim_start_matches('/'));
        let id = std::fs::metadata(&dir)
            .expect("our cgroup's directory")
            .ino();
        let paths = cgroup_path(id, "unified");
        assert_eq!(paths, format!("unified:{own}"));
        assert_eq!(cgroup_path(id, "nosuch*"), "");
    }

    /// bpftrace compares every entry's inode number, a file's too: a v1
    /// hierarchy's file can answer for a cgroup2 id, and does under both.
    #[test]
    fn any_entry_with_the_id_answers_as_in_bpftrace() {
        let root = std::env::temp_dir().join(format!("weft-cgroups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/memory.failcnt"), "0").unwrap();
        let ino = |p: &str| std::fs::metadata(root.join(p)).unwrap().ino();
        assert_eq!(path_in(&root, ino("a/b")).as_deref(), Some("/a/b"));
        let file = ino("a/b/memory.failcnt");
        assert_eq!(path_in(&root, file).as_deref(), Some("/a/b/memory.failcnt"));
        assert_eq!(path_in(&root, ino("")).as_deref(), Some("/"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
