//! Watchpoints on a function's argument (`watchpoint:increment+arg1:4:w`),
//! as bpftrace sets them: a uprobe on the function sends weft the address
//! the argument holds, and weft sets the watchpoint there, in the watched
//! process. The uprobe stops the task meanwhile (SIGSTOP, from the kernel,
//! before the function runs on), and weft lets it go on (SIGCONT) once the
//! watchpoint is set, so that none of the function's accesses is missed;
//! `asyncwatchpoint` does not stop it.

use crate::{
    Target,
    ast::{BinOp, Item},
    expand::register_args,
    plan::{Attach, Filter, Operand, Subject},
};

/// SIGSTOP: what the kernel sends a task whose watchpoint weft sets.
const STOP: u8 = 19;

/// Adds, for each watchpoint on a function's argument among `attaches`
/// from `first` on (item `index`'s), the uprobe on the function that has
/// weft set it: in the `-p` process `pid`, else in the `-c` command's
/// (another process running the file is neither stopped nor watched).
pub(crate) fn add_setups(
    attaches: &mut Vec<Attach>,
    first: usize,
    index: usize,
    item: &Item,
    pid: Option<u32>,
) {
    for watch in first..attaches.len() {
        let Target::WatchArg {
            path,
            function,
            arg,
            sync,
            ..
        } = &attaches[watch].target
        else {
            continue;
        };
        let target = Target::Uprobe {
            path: path.clone(),
            symbol: function.clone(),
            exit: false,
        };
        let (arg, sync) = (format!("arg{arg}"), *sync);
        let mut setup = Attach::new(index, item, target, register_args(), false);
        if let Some(field) = setup.field(&arg) {
            setup.raw_len = (field.offset + field.size).next_multiple_of(8);
        }
        setup.filters.push(Filter {
            subject: Subject::Pid,
            op: BinOp::Eq,
            value: pid.map_or(Operand::Cpid, |pid| Operand::Int(pid.into())),
        });
        setup.watch = Some(watch);
        setup.signal = sync.then_some(STOP);
        attaches.push(setup);
    }
}
