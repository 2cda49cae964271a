//! What the kernel reads for a program: the fields, strings, struct
//! members and memory each attach point copies, decided as the checker
//! meets them (`field`, `member`, `capture`, ...).

use weft_abi::oneliner::MAX_SAVES;

use super::{
    Attach, BinOp, Checker, Error, Expr, ExprKind, Field, FieldKind, MAX_STRINGS, MapRef, Result,
    Span, Target, Type, members, unread, uprobe_arguments,
};

/// `ty`, the type of the member read at `span` of `attach`, numbered by
/// its layout when it is a struct or array read whole.
fn intern(
    composites: &mut Vec<crate::plan::Layout>,
    attach: &Attach,
    ty: Type,
    span: Span,
) -> Type {
    if ty != members::COMPOSITE {
        return ty;
    }
    let Some(layout) = attach
        .member(span)
        .and_then(|m| m.layout)
        .and_then(|i| attach.layouts.get(usize::from(i)))
    else {
        return ty;
    };
    numbered(composites, layout.clone())
}

/// The type of values laid out as `layout`: its number among
/// `composites`, added if new.
fn numbered(composites: &mut Vec<crate::plan::Layout>, layout: crate::plan::Layout) -> Type {
    let id = composites
        .iter()
        .position(|l| *l == layout)
        .unwrap_or_else(|| {
            composites.push(layout);
            composites.len() - 1
        });
    Type::Composite(u16::try_from(id).unwrap_or(u16::MAX))
}

impl Checker<'_> {
    /// The type of a part of a struct or array read whole, laid out so.
    pub(super) fn composite_type(&mut self, layout: crate::plan::Layout) -> Type {
        match layout.scalar() {
            Some(scalar) => scalar,
            None => numbered(self.composites, layout),
        }
    }

    /// Whether `expr` is `$p[i]` of a variable holding a struct pointer,
    /// whose members the kernel reads at the event (`$p[1].m`), not an
    /// element of an array the variable holds.
    fn indexes_struct_pointer(&self, expr: &Expr) -> bool {
        matches!(&expr.kind, ExprKind::Deref(address)
            if matches!(&address.kind, ExprKind::Binary(BinOp::Add, base, _)
                if matches!(&base.kind, ExprKind::Var(name)
                    if self.bound.first().is_some_and(|b| b.contains_key(name)))))
    }

    /// A member expression (`a->b`, `a.b`) at every attach point; its
    /// string when `string` (`str(a->b)`).
    pub(super) fn member(&mut self, expr: &Expr, string: bool) -> Result<Type> {
        // `$s.name` of a struct read whole: its member's value.
        if let ExprKind::Member {
            base,
            name,
            arrow: false,
        } = &expr.kind
            && base.may_be_bytes()
            && !self.indexes_struct_pointer(base)
            && let Type::Composite(id) = self.expr(base)?
        {
            let crate::plan::Layout::Record(members) = &self.composites[usize::from(id)] else {
                return Err(Error::new(base.span, "this is an array: index it, $a[0]"));
            };
            let Some((_, _, layout)) = members.iter().find(|(n, _, _)| n == name) else {
                return Err(Error::new(
                    expr.span,
                    format!("this struct has no member `{name}`"),
                ));
            };
            let layout = layout.clone();
            return Ok(self.composite_type(layout));
        }
        self.kernel_reads();
        let read = if string {
            members::read_string
        } else {
            members::read
        };
        let mut found = None;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            let ty = read(self.kernel, attach, bound, expr)?;
            let ty = intern(self.composites, attach, ty, expr.span);
            if found.is_some_and(|t| t != ty) {
                return Err(Error::new(
                    expr.span,
                    "this member has different types across the matched probes",
                ));
            }
            found = Some(ty);
        }
        found.ok_or_else(|| Error::new(expr.span, "a member needs a probe the kernel fires"))
    }

    /// Has the kernel run the probes weft would run itself (BEGIN, END,
    /// intervals) where their actions read what only the kernel can.
    pub(super) fn kernel_reads(&mut self) {
        for attach in self.attaches.iter_mut().filter(|a| !a.in_kernel()) {
            attach.kernel_run = true;
        }
    }

    /// `@map[tid] = str(POINTER)`, a pointer saved for its string: the
    /// kernel keeps the pointer per thread too, so that where the map is
    /// read it reads the string again (`saved.rs`). One per probe.
    pub(super) fn keep_pointer(&mut self, map: &MapRef, value: &Expr) -> Result<()> {
        let Some(index) = self.kept_map(map) else {
            return Ok(());
        };
        if self.saved.pointers.contains_key(&map.name) {
            return self.keep_struct_pointer(index, map, value);
        }
        let ExprKind::Call(_, args) = &value.kind else {
            return Ok(());
        };
        let name = match args.first().map(|a| (&a.kind, a.span)) {
            Some((ExprKind::Field(n), span)) if self.saved.spans.contains(&span) => n.clone(),
            Some((ExprKind::Arg(n), span)) if self.saved.spans.contains(&span) => format!("arg{n}"),
            _ => return Ok(()),
        };
        for attach in self.attaches.iter_mut() {
            if attach.saves.len() < MAX_SAVES
                && !attach.saves.iter().any(|(_, map)| *map == index)
                && let Some(field) = attach.field(&name)
            {
                attach.saves.push((field.clone(), index));
            }
        }
        Ok(())
    }

    /// `@map[tid] = POINTER` of a map whose struct pointers a later probe
    /// reads members through: the kernel keeps the pointer per thread
    /// (`saved.rs`). A constant keeps nothing (`@sk[tid] = 0`).
    fn keep_struct_pointer(&mut self, index: usize, map: &MapRef, value: &Expr) -> Result<()> {
        if matches!(value.kind, ExprKind::Int(_)) {
            return Ok(());
        }
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            let slot = members::context_slot(self.kernel, attach, bound, value);
            let field = slot.and_then(|at| {
                (attach.fields.iter())
                    .find(|f| u32::from(f.offset) == at && f.size == 8)
                    .cloned()
            });
            let Some(field) = field else {
                return Err(Error::new(
                    value.span,
                    format!(
                        "a later probe reads members through @{}'s pointer: the kernel keeps it for the thread where it is saved, from an argument or a field (`@{}[tid] = arg0`), not from this",
                        map.name, map.name
                    ),
                ));
            };
            if attach.saves.iter().any(|(_, map)| *map == index) {
                continue;
            }
            if attach.saves.len() == MAX_SAVES {
                return Err(Error::new(
                    value.span,
                    format!(
                        "the kernel keeps {MAX_SAVES} pointers per probe for later probes to read, and this probe saves more"
                    ),
                ));
            }
            attach.saves.push((field, index));
        }
        Ok(())
    }

    /// `@map[tid]` read where the kernel keeps its pointers: the kernel
    /// reads the string of the thread's pointer into a slot, if one is free.
    pub(super) fn read_kept(&mut self, map: &MapRef) {
        let Some(index) = self.kept_map(map) else {
            return;
        };
        // Read through as a struct pointer, not as a string.
        if self.saved.pointers.contains_key(&map.name) {
            return;
        }
        for attach in self.attaches.iter_mut() {
            if attach.in_kernel() && !attach.saved.contains(&index) && attach.slots() < MAX_STRINGS
            {
                attach.saved.push(index);
            }
        }
    }

    /// The index of `map` when the kernel keeps its pointers per thread.
    pub(super) fn kept_map(&self, map: &MapRef) -> Option<usize> {
        if !self.saved.by_thread.contains(&map.name) {
            return None;
        }
        // The kernel's id is a byte, the index plus one.
        self.maps
            .iter()
            .position(|m| m.name == map.name)
            .filter(|i| *i < usize::from(u8::MAX))
    }

    /// The field `name` in every attach point, or an error naming one that lacks it.
    pub(super) fn field(&mut self, name: &str, span: Span) -> Result<Field> {
        let mut found: Option<Field> = None;
        for attach in self.attaches.iter() {
            if let Some(f) = attach.field(name) {
                if let Some(known) = &found
                    && known.kind != f.kind
                    && !(known.kind.integer() && f.kind.integer())
                {
                    return Err(Error::new(
                        span,
                        format!("`{name}` has different types across the matched probes"),
                    ));
                }
                found = Some(f.clone());
            } else {
                {
                    let names: Vec<&str> = attach.fields.iter().map(|f| f.name.as_str()).collect();
                    let has = if names.is_empty() {
                        "it has no fields".to_string()
                    } else {
                        format!("it has {}", names.join(", "))
                    };
                    return Err(Error::new(
                        span,
                        format!("{} has no field `{name}`: {has}", attach.target.name()),
                    ));
                }
            }
        }
        let field =
            found.ok_or_else(|| Error::new(span, format!("`{name}` needs a probe with fields")))?;
        Ok(field)
    }

    /// Notes that the kernel must copy `field`'s bytes.
    pub(super) fn copy(&mut self, name: &str) {
        for attach in self.attaches.iter_mut() {
            // A USDT argument in memory or a constant is not in the record.
            if let Some(f) = attach.field(name)
                && !matches!(
                    f.kind,
                    FieldKind::Memory { .. } | FieldKind::Const(_) | FieldKind::Unread
                )
            {
                let end = (f.offset + f.size).next_multiple_of(8);
                attach.raw_len = attach.raw_len.max(end);
            }
        }
    }

    /// `join(array [, separator])`: the kernel reads the strings of a
    /// pointer array field (`args.argv`, `argN`) when the event happens.
    pub(super) fn join(&mut self, args: &[Expr], span: Span) -> Result<()> {
        let usage = "join() takes a field holding an array of string pointers and an optional separator: join(args.argv), join(arg1, \",\")";
        let (array, separator) = match args {
            [array] => (array, None),
            [array, separator] => (array, Some(separator)),
            _ => return Err(Error::new(span, usage)),
        };
        if let Some(separator) = separator
            && !matches!(separator.kind, ExprKind::Str(_))
        {
            return Err(Error::new(
                separator.span,
                "join()'s separator must be a string literal",
            ));
        }
        let name = match &array.kind {
            ExprKind::Field(n) => n.clone(),
            ExprKind::Arg(n) => format!("arg{n}"),
            _ => return Err(Error::new(array.span, usage)),
        };
        let field = self.field(&name, array.span)?.clone();
        // argN is a register or argument slot: any 64-bit value.
        let pointer = match field.kind {
            FieldKind::Pointer { .. } => true,
            FieldKind::Int => matches!(array.kind, ExprKind::Arg(_)),
            _ => false,
        };
        if !pointer || field.size != 8 {
            return Err(Error::new(
                array.span,
                format!("join() reads an array of pointers: `{name}` is not a pointer"),
            ));
        }
        for attach in self.attaches.iter_mut() {
            let field = attach.field(&name).expect("checked").clone();
            match &attach.join {
                Some(joined) if joined.name != name => {
                    return Err(Error::new(
                        span,
                        format!(
                            "a probe can join() one array: it already joins `{}`",
                            joined.name
                        ),
                    ));
                }
                _ => attach.join = Some(field),
            }
        }
        Ok(())
    }

    /// Notes that the kernel must read `field`'s string.
    pub(super) fn capture(&mut self, name: &str, span: Span) -> Result<()> {
        for attach in self.attaches.iter_mut() {
            if attach.string_slot(name).is_some() {
                continue;
            }
            if attach.slots() == MAX_STRINGS {
                return Err(Error::new(
                    span,
                    format!("a probe can read at most {MAX_STRINGS} strings and struct regions"),
                ));
            }
            let field = attach.field(name).expect("checked").clone();
            // A USDT argument in memory has a read of its own
            // (`usdt_memory`); a constant is no pointer.
            if matches!(field.kind, FieldKind::Memory { .. } | FieldKind::Const(_)) {
                continue;
            }
            attach.strings.push(field);
        }
        Ok(())
    }

    /// A value field (`args.x`, `argN`, `retval`): its type, copying it.
    pub(super) fn value_field(&mut self, name: &str, span: Span) -> Result<Type> {
        let field = self.field(name, span)?;
        match field.kind {
            FieldKind::DataLoc => {
                self.capture(name, span)?;
                Ok(Type::Str)
            }
            FieldKind::Chars => {
                self.copy(name);
                Ok(Type::Str)
            }
            FieldKind::Int
            | FieldKind::Pointer { .. }
            | FieldKind::Const(_)
            | FieldKind::Memory { .. } => {
                self.integer(name, span)?;
                Ok(Type::Int)
            }
            FieldKind::Unread => Err(unread(name, span)),
        }
    }

    /// Integer field `name`: copied where the record holds it, read by the
    /// kernel where it is in memory (a USDT argument), nothing where it is
    /// a constant.
    pub(super) fn integer(&mut self, name: &str, span: Span) -> Result<()> {
        self.copy(name);
        self.usdt_memory(name, span, false)
    }

    /// Has the kernel read USDT argument `name` (its value, or with
    /// `string` the string it points to) where it is in memory; an error
    /// where weft cannot read it.
    pub(super) fn usdt_memory(&mut self, name: &str, span: Span, string: bool) -> Result<()> {
        for attach in self.attaches.iter_mut() {
            let Some(field) = attach.field(name).cloned() else {
                continue;
            };
            match field.kind {
                FieldKind::Memory { at } => members::memory_arg(attach, &field, at, span, string)?,
                FieldKind::Unread => return Err(unread(name, span)),
                _ => {}
            }
        }
        Ok(())
    }

    /// `args.NAME`.
    pub(super) fn named_field(&mut self, name: &str, span: Span) -> Result<Type> {
        if self.attaches.iter().any(|a| {
            matches!(
                a.target,
                Target::Kprobe { .. } | Target::Usdt { .. } | Target::RawTracepoint { .. }
            )
        }) {
            return Err(Error::new(
                span,
                "kprobes, usdt and raw tracepoints have no named fields: use arg0, arg1, ...",
            ));
        }
        if let Some(attach) = self.attaches.iter().find(|a| {
            matches!(a.target, Target::Uprobe { exit: false, .. }) && a.field(name).is_none()
        }) {
            return Err(Error::new(
                span,
                format!(
                    "{} has no argument `{name}`: {}",
                    attach.target.name(),
                    uprobe_arguments(attach)
                ),
            ));
        }
        if self
            .attaches
            .iter()
            .any(|a| matches!(a.target, Target::Uprobe { exit: true, .. }))
        {
            return Err(Error::new(
                span,
                "a uretprobe has no arguments by name (they are gone when the function returns): save them in its uprobe, `@a[tid] = args->NAME`",
            ));
        }
        self.value_field(name, span)
    }

    /// `reg("NAME")`: a register at the probe, which the kernel copies with
    /// the rest of `struct pt_regs` up to it.
    pub(super) fn register(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [
            Expr {
                kind: ExprKind::Str(name),
                ..
            },
        ] = args
        else {
            return Err(Error::new(
                span,
                "reg() takes a register's name: reg(\"ip\")",
            ));
        };
        let field = crate::expand::register_field(name).ok_or_else(|| {
            Error::new(
                args[0].span,
                format!(
                    "`{name}` is not an x86-64 register of struct pt_regs (ip, sp, ax, di, r8, ...)"
                ),
            )
        })?;
        for attach in self.attaches.iter_mut() {
            if !matches!(
                attach.target,
                Target::Kprobe { .. } | Target::Uprobe { .. } | Target::Usdt { .. }
            ) {
                return Err(Error::new(
                    span,
                    "reg() exists in kprobes and uprobes, whose context is the registers",
                ));
            }
            if attach.field(&field.name).is_none() {
                attach.fields.push(field.clone());
            }
        }
        self.value_field(&field.name, span)
    }

    /// `*address`, which weft reads where it runs the probe: in BEGIN, END
    /// and intervals from /proc/kcore (but for a fixed address), in probes
    /// the kernel fires the kernel at the event, following the pointers
    /// the address is from.
    pub(super) fn deref(&mut self, address: &Expr, span: Span) -> Result<Type> {
        // `$a[i]` of an array of bytes (`pton()`'s): a byte, in weft; of
        // an array read whole, its element.
        if let ExprKind::Binary(BinOp::Add, base, index) = &address.kind
            && base.may_be_bytes()
        {
            match self.expr(base)? {
                Type::Bytes(_) => {
                    self.want(index, Type::Int, "an array's index")?;
                    return Ok(Type::Int);
                }
                Type::Composite(id) => {
                    self.want(index, Type::Int, "an array's index")?;
                    let crate::plan::Layout::Array { element, .. } =
                        &self.composites[usize::from(id)]
                    else {
                        return Err(Error::new(
                            base.span,
                            "this is a struct: read a member, $s.name",
                        ));
                    };
                    let element = (**element).clone();
                    return Ok(self.composite_type(element));
                }
                _ => {}
            }
        }
        // A fixed address the kernel reads, as bpftrace's BEGIN does: weft
        // needs /proc/kcore for it, which many hosts lack.
        if !self.attaches.iter().any(Attach::in_kernel) && !members::is_fixed(address) {
            self.want(address, Type::Int, "an address")?;
            return Ok(Type::Int);
        }
        self.kernel_reads();
        let mut found = Type::Int;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            let ty = members::read_deref(self.kernel, attach, bound, address, span)?;
            found = intern(self.composites, attach, ty, span);
        }
        Ok(found)
    }

    /// `*address` (`$s->names[1]`, `expr`) of a row of an array of arrays:
    /// a row of chars is the string it holds.
    pub(super) fn row(&mut self, address: &Expr, expr: &Expr) -> Result<Type> {
        self.kernel_reads();
        let mut ty = Type::Str;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            ty = members::read_row(self.kernel, attach, bound, address, expr)?;
        }
        Ok(ty)
    }

    /// `curtask` as a value: the kernel copies the task's address.
    pub(super) fn task_address(&mut self, span: Span) -> Result<Type> {
        self.kernel_reads();
        for attach in self.attaches.iter_mut() {
            members::read_task_address(attach, span)?;
        }
        Ok(Type::Int)
    }

    /// `str(address)` of a stepped or cast pointer: the string there.
    pub(super) fn string_at(&mut self, address: &Expr) -> Result<Type> {
        self.kernel_reads();
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            members::read_string_at(self.kernel, attach, bound, address)?;
        }
        Ok(Type::Str)
    }

    /// `str(*address)`: the string the pointer at `address` points to.
    pub(super) fn deref_string(&mut self, address: &Expr, target: &Expr) -> Result<Type> {
        self.kernel_reads();
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            members::read_deref_string(self.kernel, attach, bound, address, target)?;
        }
        Ok(Type::Str)
    }
}
