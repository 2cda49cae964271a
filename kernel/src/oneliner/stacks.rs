//! `kstack` and `ustack`: stack ids from the kernel's stack map, turned into
//! named frames (kernel frames as `function+offset` from `/proc/kallsyms`,
//! user frames as `function+offset` from the process's files, their debug
//! files or dynamic symbols, demangled), which `weft-oneliner` prints.

use std::{cell::RefCell, collections::HashMap, path::Path, rc::Rc};

use aya::maps::{MapData, StackTraceMap};
use weft_oneliner::{Frame, Stack};
use weft_symbols::{FileOffsets, Finder, Process};

/// Kernel text symbols by address.
struct Kallsyms {
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    fn read() -> Self {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let address = u64::from_str_radix(words.next()?, 16).ok()?;
                let kind = words.next()?;
                let name = words.next()?;
                (address != 0 && matches!(kind, "t" | "T")).then(|| (address, name.to_string()))
            })
            .collect();
        symbols.sort_unstable();
        Self { symbols }
    }

    /// `function+offset`, or the address when no symbol covers it.
    fn name(&self, address: u64) -> String {
        match self.holding(address) {
            Some((start, name)) => format!("{name}+{}", address - start),
            None => format!("0x{address:x}"),
        }
    }

    /// The function holding `address`.
    fn function(&self, address: u64) -> Option<&str> {
        self.holding(address).map(|(_, name)| name.as_str())
    }

    fn holding(&self, address: u64) -> Option<&(u64, String)> {
        let at = self.symbols.partition_point(|(a, _)| *a <= address);
        at.checked_sub(1).map(|i| &self.symbols[i])
    }
}

/// Function names of the kernel and of each process, read once each and
/// shared by the stacks and by `usym()`/`ksym()`.
struct Naming {
    kallsyms: Option<Kallsyms>,
    /// Each process's functions, read at the first of its addresses asked
    /// for (a library it loads later is not named).
    processes: HashMap<u32, Process>,
    finder: Finder,
}

impl Naming {
    fn kallsyms(&mut self) -> &Kallsyms {
        self.kallsyms.get_or_insert_with(Kallsyms::read)
    }

    fn process(&mut self, pid: u32) -> &Process {
        let finder = &self.finder;
        self.processes
            .entry(pid)
            .or_insert_with(|| finder.process(pid))
    }
}

/// Stacks by id, read from the kernel's stack map and named once each (an
/// id is never reused for another stack: the map is not told to replace).
pub struct Stacks {
    naming: Rc<RefCell<Naming>>,
    kernel: HashMap<i32, Option<Rc<Stack>>>,
    /// By process and id: the same addresses name other functions in
    /// another process.
    user: HashMap<(u32, i32), Option<Rc<Stack>>>,
}

impl Stacks {
    /// Names user functions with `finder`.
    pub fn new(finder: Finder) -> Self {
        let naming = Naming {
            kallsyms: None,
            processes: HashMap::new(),
            finder,
        };
        Self {
            naming: Rc::new(RefCell::new(naming)),
            kernel: HashMap::new(),
            user: HashMap::new(),
        }
    }

    /// Kernel stack `id` (none when not recorded).
    pub fn kernel<T: std::borrow::Borrow<MapData>>(
        &mut self,
        map: &StackTraceMap<T>,
        id: i32,
    ) -> Option<Rc<Stack>> {
        let naming = &self.naming;
        let stack = self.kernel.entry(id).or_insert_with(|| {
            let mut naming = naming.borrow_mut();
            let kallsyms = naming.kallsyms();
            read(map, id, false, |ip| (kallsyms.name(ip), None))
        });
        stack.clone()
    }

    /// User stack `id` of process `pid` (none when not recorded).
    pub fn user<T: std::borrow::Borrow<MapData>>(
        &mut self,
        map: &StackTraceMap<T>,
        pid: u32,
        id: i32,
    ) -> Option<Rc<Stack>> {
        let naming = &self.naming;
        let stack = self.user.entry((pid, id)).or_insert_with(|| {
            let mut naming = naming.borrow_mut();
            let process = naming.process(pid);
            read(map, id, true, |ip| match process.at(ip) {
                Some((name, offset)) => (
                    format!("{name}+{offset}"),
                    process.file_at(ip).map(str::to_string),
                ),
                None => (format!("0x{ip:x}"), None),
            })
        });
        stack.clone()
    }

    /// How many stacks and processes it holds named.
    pub fn held(&self) -> usize {
        self.kernel.len() + self.user.len() + self.naming.borrow().processes.len()
    }

    /// Where uprobes find their functions, as the stacks' names are found.
    pub fn file_offsets(&self, file: &Path) -> Result<FileOffsets, weft_symbols::Error> {
        self.naming.borrow().finder.file_offsets(file)
    }

    /// `usym()` and `ksym()`'s names, from the same cache as the stacks'.
    pub fn names(&self) -> Names {
        Names(Rc::clone(&self.naming))
    }
}

/// Function names for `usym()` and `ksym()`: the stacks' own, so a process
/// or the kernel's symbols are read once however they are asked for.
pub struct Names(Rc<RefCell<Naming>>);

impl weft_oneliner::Names for Names {
    fn user(&mut self, pid: u32, addr: u64) -> Option<String> {
        let mut naming = self.0.borrow_mut();
        naming
            .process(pid)
            .at(addr)
            .map(|(name, _)| name.to_string())
    }

    fn kernel(&mut self, addr: u64) -> Option<String> {
        let mut naming = self.0.borrow_mut();
        naming.kallsyms().function(addr).map(str::to_string)
    }
}

/// Stack `id` of the kernel's map, each frame named (and its file found) by
/// `name`.
fn read<T: std::borrow::Borrow<MapData>>(
    map: &StackTraceMap<T>,
    id: i32,
    user: bool,
    name: impl Fn(u64) -> (String, Option<String>),
) -> Option<Rc<Stack>> {
    let stack = map.get(&u32::try_from(id).ok()?, 0).ok()?;
    let frames = stack
        .frames()
        .iter()
        .map(|frame| {
            let (name, file) = name(frame.ip);
            Frame {
                ip: frame.ip,
                name,
                file,
            }
        })
        .collect();
    Some(Rc::new(Stack { user, frames }))
}
