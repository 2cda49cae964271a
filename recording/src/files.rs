//! The `file` of each `args` record, and the `paths` source that names it.
//! The kernel sends descriptors, and the path an open-family call was
//! given; this keeps each process's descriptors as the calls it saw open,
//! copy and close them, names one it has not seen opened (opened before the
//! recording began, or by a call the source does not take: a pipe, an
//! eventfd) from `/proc/PID/fd`, and stores each name once, by number.

use std::collections::HashMap;
use std::mem::offset_of;
use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use weft_abi::args::{ArgsEvent, EVENT_SIZE, calls};
use weft_store::{SourceId, Store};

/// Descriptors kept, over every process; past it the table is cleared
/// (descriptors are named again from `/proc`).
const MAX_FDS: usize = 1 << 20;

/// Names kept with their numbers; past it they are forgotten (a name met
/// again is stored again under a new number). Names come from any user's
/// calls (a flood of opens of made-up paths makes a new one each): at
/// most 255 bytes each, this bounds their memory to about 25 MiB.
const MAX_NAMES: usize = 1 << 16;

/// A name met again is stored again after this long (ns), so that a
/// recording's ring (`--retain`, `--max-disk`), which deletes its oldest
/// records, keeps the names its newer records use.
const RENOTE_NS: u64 = 60_000_000_000;

/// `openat`'s "the current directory" descriptor.
const AT_FDCWD: i32 = -100;

/// Names the files of `args` records.
pub struct FileNames {
    source: SourceId,
    /// Each process's descriptors: the number of the name of each.
    fds: HashMap<(u32, i32), u32>,
    /// The number of each name met.
    names: HashMap<Arc<str>, u32>,
    /// Each number's name, and when it was last stored.
    numbers: HashMap<u32, (Arc<str>, u64)>,
    /// The last number given (0 means "unknown").
    last: u32,
}

impl FileNames {
    /// Defines the `paths` source.
    pub fn define(store: &mut Store) -> Result<Self> {
        Ok(Self {
            source: weft_capture::sources::own::PATHS.define(store)?,
            fds: HashMap::new(),
            names: HashMap::new(),
            numbers: HashMap::new(),
            last: 0,
        })
    }

    /// `record`, an `args` record as the kernel sent it, with its file
    /// named, and the path after it (an open's) replaced by its number.
    pub fn name(&mut self, store: &mut Store, now: u64, record: &[u8]) -> Result<Vec<u8>> {
        let Some(event) = ArgsEvent::read(record) else {
            return Ok(record.to_vec());
        };
        if self.fds.len() >= MAX_FDS {
            self.fds.clear();
        }
        let (file, given) = if calls::path_arg(event.nr).is_some() {
            self.opened(store, now, &event, record.get(EVENT_SIZE..))?
        } else {
            (self.file_of(store, now, &event)?, 0)
        };
        let mut named = record[..EVENT_SIZE].to_vec();
        named[offset_of!(ArgsEvent, file)..][..4].copy_from_slice(&file.to_le_bytes());
        named[offset_of!(ArgsEvent, given)..][..4].copy_from_slice(&given.to_le_bytes());
        Ok(named)
    }

    /// The numbers of an open's file (its path made absolute) and of the
    /// path as given; the new descriptor takes the file's.
    fn opened(
        &mut self,
        store: &mut Store,
        now: u64,
        event: &ArgsEvent,
        path: Option<&[u8]>,
    ) -> Result<(u32, u32)> {
        let path = path.unwrap_or_default();
        let given = &path[..(event.given as usize).min(path.len())];
        let given = String::from_utf8_lossy(given).into_owned();
        let name = self.absolute(store, now, event, &given)?;
        let as_given = (name != given).then_some(given);
        let file = self.number(store, now, name)?;
        let given = match as_given {
            Some(given) => self.number(store, now, given)?,
            None => file,
        };
        if let Ok(fd) = i32::try_from(event.ret)
            && fd >= 0
        {
            self.fds.insert((event.pid, fd), file);
        }
        Ok((file, given))
    }

    /// The number of the name of `event`'s file, its process's descriptors
    /// brought up to date with what the call did.
    fn file_of(&mut self, store: &mut Store, now: u64, event: &ArgsEvent) -> Result<u32> {
        let pid = event.pid;
        let made = i32::try_from(event.ret).ok().filter(|fd| *fd >= 0);
        if calls::duplicates(event.nr) {
            let file = self.descriptor(store, now, pid, event.fd)?;
            if let Some(fd) = made {
                self.fds.insert((pid, fd), file);
            }
            return Ok(file);
        }
        if calls::creates(event.nr) {
            let Some(fd) = made else {
                return Ok(0);
            };
            self.fds.remove(&(pid, fd));
            return self.descriptor(store, now, pid, fd);
        }
        match event.nr {
            calls::CLOSE => {
                let file = self.fds.get(&(pid, event.fd)).copied().unwrap_or(0);
                if event.ret == 0 {
                    self.fds.remove(&(pid, event.fd));
                }
                Ok(file)
            }
            calls::CLOSE_RANGE => {
                if event.ret == 0 {
                    // Unsigned, as the kernel takes them (`~0U`: to the last).
                    let (first, last) = (u64::from(event.fd.cast_unsigned()), event.count);
                    let closed = |fd: i32| (first..=last).contains(&u64::from(fd.cast_unsigned()));
                    self.fds.retain(|&(p, fd), _| p != pid || !closed(fd));
                }
                Ok(0)
            }
            _ => self.descriptor(store, now, pid, event.fd),
        }
    }

    /// The path an open-family call was given, made absolute from the
    /// directory it is relative to (its process's current directory, or
    /// `openat`'s directory descriptor) where weft knows it.
    fn absolute(
        &mut self,
        store: &mut Store,
        now: u64,
        event: &ArgsEvent,
        given: &str,
    ) -> Result<String> {
        if given.starts_with('/') || given.is_empty() {
            return Ok(given.to_owned());
        }
        let base = if event.fd == AT_FDCWD || matches!(event.nr, calls::OPEN | calls::CREAT) {
            proc_link(event.pid, "cwd")
        } else {
            let file = self.descriptor(store, now, event.pid, event.fd)?;
            self.numbers.get(&file).map(|(name, _)| name.to_string())
        };
        Ok(match base {
            Some(base) => format!("{}/{given}", base.trim_end_matches('/')),
            None => given.to_owned(),
        })
    }

    /// The number of the name of process `pid`'s descriptor `fd`: as the
    /// calls seen left it, else as `/proc` names it now (0: unknown). An
    /// unknown one is remembered as such until a call names it, so that a
    /// flood of calls on a closed descriptor costs one `/proc` lookup.
    fn descriptor(&mut self, store: &mut Store, now: u64, pid: u32, fd: i32) -> Result<u32> {
        if fd < 0 {
            return Ok(0);
        }
        if let Some(&file) = self.fds.get(&(pid, fd)) {
            self.keep(store, now, file)?;
            return Ok(file);
        }
        let file = match proc_link(pid, &format!("fd/{fd}")) {
            Some(name) => self.number(store, now, name)?,
            None => 0,
        };
        self.fds.insert((pid, fd), file);
        Ok(file)
    }

    /// The number of `name`, stored under it when new.
    fn number(&mut self, store: &mut Store, now: u64, name: String) -> Result<u32> {
        if let Some(&number) = self.names.get(name.as_str()) {
            self.keep(store, now, number)?;
            return Ok(number);
        }
        if self.names.len() >= MAX_NAMES {
            self.names.clear();
            self.numbers.clear();
        }
        self.last += 1;
        let name: Arc<str> = name.into();
        self.store(store, now, self.last, &name)?;
        self.names.insert(name.clone(), self.last);
        self.numbers.insert(self.last, (name, now));
        Ok(self.last)
    }

    /// Stores name `number` again when it was last stored [`RENOTE_NS`]
    /// ago: a record that uses it keeps it in the capture (a file read for
    /// hours under `--retain 10m`).
    fn keep(&mut self, store: &mut Store, now: u64, number: u32) -> Result<()> {
        let Some((name, stored)) = self.numbers.get_mut(&number) else {
            return Ok(());
        };
        if now.saturating_sub(*stored) <= RENOTE_NS {
            return Ok(());
        }
        *stored = now;
        let name = name.clone();
        self.store(store, now, number, &name)
    }

    fn store(&self, store: &mut Store, now: u64, number: u32, name: &str) -> Result<()> {
        let mut payload = Vec::with_capacity(4 + name.len());
        payload.extend_from_slice(&number.to_le_bytes());
        payload.extend_from_slice(name.as_bytes());
        store.append_at(self.source, now, None, &payload)?;
        Ok(())
    }
}

/// Where `/proc/PID/<link>` points, if the process and the link are there.
fn proc_link(pid: u32, link: &str) -> Option<String> {
    let target = std::fs::read_link(Path::new("/proc").join(pid.to_string()).join(link)).ok()?;
    Some(target.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use weft_abi::events::Header;
    use weft_store::Config;

    use super::*;

    /// A process that does not exist: `/proc` names nothing of it.
    const PID: u32 = u32::MAX - 7;

    /// An `args` record of call `nr` on `fd` that returned `ret`, with
    /// `path` after it.
    fn record(nr: u32, fd: i32, ret: i64, count: u64, path: &str) -> Vec<u8> {
        let event = ArgsEvent {
            header: Header::default(),
            exit_ns: 1,
            duration_ns: 1,
            ret,
            pid: PID,
            tid: PID,
            nr,
            fd,
            count,
            file: 0,
            given: path.len() as u32,
        };
        // SAFETY: the plain integers of a `#[repr(C)]` record without holes.
        let bytes: [u8; EVENT_SIZE] = unsafe { std::mem::transmute(event) };
        [&bytes[..], path.as_bytes()].concat()
    }

    /// A store of its own with the `paths` source, in a directory removed
    /// with it.
    struct Scratch {
        dir: std::path::PathBuf,
        store: Store,
        files: FileNames,
    }

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("weft-files-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let mut store = Store::open(&dir, &Config::default()).unwrap();
            let files = FileNames::define(&mut store).unwrap();
            Self { dir, store, files }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn descriptors_are_named_as_the_calls_seen_open_copy_and_close_them() {
        let mut scratch = Scratch::new("table");
        let Scratch { store, files, .. } = &mut scratch;
        let mut name_of = |record: Vec<u8>| {
            let named = files.name(store, 1, &record).unwrap();
            assert_eq!(named.len(), EVENT_SIZE, "the path is dropped");
            let event = ArgsEvent::read(&named).unwrap();
            (event.file, event.given)
        };
        assert_eq!(name_of(record(calls::OPEN, -1, 3, 0, "/data")), (1, 1));
        // Relative to descriptor 3, which names a directory: the path as
        // given is kept apart.
        assert_eq!(name_of(record(calls::OPENAT, 3, 4, 0, "x.db")), (2, 3));
        let mut file = |record: Vec<u8>| name_of(record).0;
        let (data, db) = (1, 2);
        assert_eq!(file(record(calls::READ, 4, 10, 4096, "")), db);
        assert_eq!(file(record(calls::DUP, 4, 5, 0, "")), db);
        assert_eq!(file(record(calls::CLOSE, 4, 0, 0, "")), db);
        assert_eq!(file(record(calls::READ, 4, -9, 4096, "")), 0, "closed");
        assert_eq!(file(record(calls::READ, 5, 10, 4096, "")), db, "the copy");
        // A failed open is named too, and gives no descriptor.
        let missing = file(record(calls::OPENAT, AT_FDCWD, -2, 0, "/missing"));
        assert!(missing != 0 && missing != db);
        assert_eq!(file(record(calls::CLOSE_RANGE, 0, 0, 10, "")), 0);
        assert_eq!(
            file(record(calls::READ, 5, -9, 4096, "")),
            0,
            "closed by range"
        );
        assert_eq!(file(record(calls::OPEN, -1, 3, 0, "/data")), data, "known");
        store.publish();
        let snapshot = store.snapshot();
        let paths = snapshot
            .meta()
            .sources
            .iter()
            .find(|s| s.name == "paths")
            .unwrap();
        let mut names = weft_capture::sources::numbered(&snapshot, paths.id).unwrap();
        names.sort();
        assert_eq!(
            names,
            [
                (data, "/data".into()),
                (db, "/data/x.db".into()),
                (3, "x.db".into()),
                (missing, "/missing".into())
            ]
        );
    }

    #[test]
    fn names_any_user_can_make_up_are_kept_in_bounded_memory() {
        let mut scratch = Scratch::new("bound");
        let Scratch { store, files, .. } = &mut scratch;
        for i in 0..MAX_NAMES + 10 {
            let path = format!("/made/up/{i}");
            let named = files.name(store, 1, &record(calls::OPEN, -1, -2, 0, &path));
            assert!(ArgsEvent::read(&named.unwrap()).unwrap().file != 0);
            assert!(files.names.len() <= MAX_NAMES && files.numbers.len() <= MAX_NAMES);
        }
        assert!(files.names.len() < 100, "cleared once full");
    }

    #[test]
    fn a_file_in_use_keeps_its_name_in_a_ring_that_deletes_old_records() {
        let mut scratch = Scratch::new("renote");
        let Scratch { store, files, .. } = &mut scratch;
        files
            .name(store, 1, &record(calls::OPEN, -1, 3, 0, "/db"))
            .unwrap();
        // Reads on the descriptor an hour on: the name is stored again
        // (once a minute), though no open names it.
        for minute in 1..=60 {
            let now = 1 + minute * (RENOTE_NS + 1);
            let read = files
                .name(store, now, &record(calls::READ, 3, 10, 4096, ""))
                .unwrap();
            assert_eq!(ArgsEvent::read(&read).unwrap().file, 1);
        }
        store.publish();
        let snapshot = store.snapshot();
        let paths = (snapshot.meta().sources.iter())
            .find(|s| s.name == "paths")
            .unwrap();
        let names = weft_capture::sources::numbered(&snapshot, paths.id).unwrap();
        assert_eq!(names.len(), 61, "stored at the open and each minute after");
    }
}
