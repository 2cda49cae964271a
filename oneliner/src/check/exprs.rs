//! The types of expressions: operators, builtins and functions, each
//! checked against what its operands are (the kernel reads they need are
//! `reads.rs`'s).

use super::{
    BinOp, Builtin, Checker, Element, Error, Expr, ExprKind, FieldKind, KernelType, MapRef, Result,
    SizeOf, Span, StackMode, Target, Type, UnOp, members,
    plan::{SkbOutput, Start},
    pton, stack_frames, unread,
};

impl Checker<'_> {
    pub(super) fn want(&mut self, expr: &Expr, want: Type, what: &str) -> Result<()> {
        let found = self.expr(expr)?;
        self.want_type(expr, found, want, what)
    }

    /// An error unless `found`, the type of `expr`, is `want`.
    pub(super) fn want_type(&self, expr: &Expr, found: Type, want: Type, what: &str) -> Result<()> {
        if found != want {
            return Err(Error::new(
                expr.span,
                format!(
                    "{what} must be {}, not {}",
                    self.type_name(want),
                    self.type_name(found)
                ),
            ));
        }
        Ok(())
    }

    /// `t` in words; a tuple with its elements' types, `a tuple (int,
    /// string)`.
    pub(super) fn type_name(&self, t: Type) -> String {
        match t {
            Type::Tuple(id) => format!("a tuple ({})", self.elements(id)),
            Type::Bytes(n) => format!("an array of {n} bytes"),
            other => other.name().to_string(),
        }
    }

    /// The element types of tuple type `id`, as `int, string, (int, int)`.
    pub(super) fn elements(&self, id: u16) -> String {
        self.tuples[usize::from(id)]
            .iter()
            .map(|t| match t {
                Type::Int => "int".to_string(),
                Type::Str => "string".to_string(),
                Type::Tuple(inner) => format!("({})", self.elements(*inner)),
                Type::Bytes(n) => format!("int8[{n}]"),
                Type::Composite(_) => "struct or array".to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tuple type of elements of `types`: the same number for the same
    /// types.
    pub(super) fn tuple_type(&mut self, types: Vec<Type>) -> Type {
        let id = if let Some(at) = self.tuples.iter().position(|t| *t == types) {
            at
        } else {
            self.tuples.push(types);
            self.tuples.len() - 1
        };
        Type::Tuple(u16::try_from(id).unwrap_or(u16::MAX))
    }

    pub(super) fn expr(&mut self, expr: &Expr) -> Result<Type> {
        let span = expr.span;
        match &expr.kind {
            // Constants are values by now (`constants.rs`).
            // Types' sizes are constants, like names, resolved before the
            // checker runs.
            ExprKind::Int(_) | ExprKind::Constant(_) | ExprKind::SizeOf(SizeOf::Type(_)) => {
                Ok(Type::Int)
            }
            ExprKind::Str(_) => Ok(Type::Str),
            ExprKind::Builtin(b) => self.builtin(*b, span),
            ExprKind::Field(name) => self.named_field(name, span),
            ExprKind::Arg(n) => {
                if self
                    .attaches
                    .iter()
                    .any(|a| matches!(a.target, Target::Tracepoint { .. } | Target::Fentry { .. }))
                {
                    return Err(Error::new(
                        span,
                        format!(
                            "arg{n} exists in kprobes, uprobes and raw tracepoints; this probe names its fields: args.NAME"
                        ),
                    ));
                }
                self.value_field(&format!("arg{n}"), span)
            }
            // Its address, copied by the kernel where it is used.
            ExprKind::Var(name) if self.task_vars.contains(name) => self.task_address(span),
            ExprKind::Member { .. } => self.member(expr, false),
            ExprKind::StructCast(name, inner) => {
                self.kernel.record(name).map_err(|e| Error::new(span, e))?;
                self.want(inner, Type::Int, "what a pointer cast converts")?;
                Ok(Type::Int)
            }
            ExprKind::Var(name) => {
                self.vars.get(name).copied().ok_or_else(|| {
                    Error::new(span, format!("${name} is used before it is assigned"))
                })
            }
            ExprKind::Map(map) => self.map_read(map, span),
            ExprKind::Deref(address) if self.row_type(address).is_some() => self.row(address, expr),
            ExprKind::Deref(address) => self.deref(address, span),
            ExprKind::Unary(op, operand) => {
                let what = match op {
                    UnOp::Not => "the operand of `!`",
                    UnOp::Neg => "the operand of `-`",
                    UnOp::BitNot => "the operand of `~`",
                    UnOp::Cast { .. } => "what an integer cast converts",
                    UnOp::Pointer { .. } => "the address a pointer cast holds",
                };
                self.want(operand, Type::Int, what)?;
                Ok(Type::Int)
            }
            ExprKind::Binary(op, left, right) => self.binary(*op, left, right, span),
            ExprKind::Ternary(cond, then, otherwise) => {
                self.want(cond, Type::Int, "a condition")?;
                let t = self.expr(then)?;
                self.want(otherwise, t, "both branches of `?:`")?;
                Ok(t)
            }
            ExprKind::Tuple(elements) => {
                let mut types = Vec::new();
                for element in elements {
                    types.push(self.expr(element)?);
                }
                Ok(self.tuple_type(types))
            }
            ExprKind::Element { tuple, index } => self.element(tuple, *index, span),
            ExprKind::Step { target, .. } => {
                self.want(target, Type::Int, "what `++` and `--` update")?;
                Ok(Type::Int)
            }
            ExprKind::Call(name, args) => self.call(name, args, span),
            ExprKind::SizeOf(SizeOf::Expr(measured)) => {
                let size = self.size_of(measured)?;
                self.sizes.insert(span, size);
                Ok(Type::Int)
            }
        }
    }

    pub(super) fn builtin(&mut self, builtin: Builtin, span: Span) -> Result<Type> {
        match builtin {
            Builtin::Comm | Builtin::Probe | Builtin::Username => Ok(Type::Str),
            Builtin::Func => {
                if self.attaches.iter().any(|a| a.target.function().is_empty()) {
                    return Err(Error::new(
                        span,
                        "`func` exists only in kprobe, uprobe and fentry probes",
                    ));
                }
                Ok(Type::Str)
            }
            Builtin::Retval => {
                if self.attaches.iter().any(|a| a.field("retval").is_none()) {
                    return Err(Error::new(
                        span,
                        "`retval` exists only in kretprobe, uretprobe and fexit probes (tracepoint sys_exit_* has args.ret)",
                    ));
                }
                self.value_field("retval", span)
            }
            Builtin::Curtask => self.task_address(span),
            Builtin::Kstack | Builtin::Ustack => {
                self.kernel_reads();
                for attach in self.attaches.iter_mut() {
                    if builtin == Builtin::Kstack {
                        attach.kstack = true;
                    } else {
                        attach.ustack = true;
                    }
                }
                Ok(Type::Str)
            }
            _ => Ok(Type::Int),
        }
    }

    /// `left op right`: an integer, of integers, or of two strings or
    /// tuples of one type where `op` compares them.
    pub(super) fn binary(
        &mut self,
        op: BinOp,
        left: &Expr,
        right: &Expr,
        span: Span,
    ) -> Result<Type> {
        let l = self.expr(left)?;
        let r = self.expr(right)?;
        self.pointer_arithmetic(op, left, right, span)?;
        if matches!(op, BinOp::Add | BinOp::Sub)
            && !self.is_pointer(right)
            && let Some(size) = self.pointee_size(left).filter(|size| *size > 1)
        {
            self.steps.insert(span, size);
        }
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            if l != r {
                return Err(Error::new(
                    span,
                    format!(
                        "cannot compare {} with {}",
                        self.type_name(l),
                        self.type_name(r)
                    ),
                ));
            }
        } else if let Some(tuple) = [(l, left), (r, right)]
            .iter()
            .find(|(t, _)| matches!(t, Type::Tuple(_)))
        {
            return Err(Error::new(
                tuple.1.span,
                "this is a tuple: only == and != apply to tuples (compare an element, $t.0)",
            ));
        } else if let Some(array) = [(l, left), (r, right)]
            .iter()
            .find(|(t, _)| matches!(t, Type::Bytes(_)))
        {
            return Err(Error::new(
                array.1.span,
                "this is an array of bytes: only == and != apply to it (or index it, $a[0])",
            ));
        } else if (l == Type::Str || r == Type::Str)
            && !matches!(op, BinOp::LogicalAnd | BinOp::LogicalOr)
        {
            // `&&` and `||` take a string as true where it is not
            // empty, as a predicate does (`/pid == 42 && @name[tid]/`).
            let bad = if l == Type::Str { left } else { right };
            return Err(Error::new(
                bad.span,
                "this is a string: only ==, != and the logical && and || apply to strings",
            ));
        }
        Ok(Type::Int)
    }

    /// Refuses what bpftrace refuses of a pointer: it is compared, or
    /// moved by an integer added or taken away, and nothing else (`p * 2`,
    /// `p & 1`, `p - q` and `1 - p` have no meaning as addresses).
    fn pointer_arithmetic(&self, op: BinOp, left: &Expr, right: &Expr, span: Span) -> Result<()> {
        let (l, r) = (self.is_pointer(left), self.is_pointer(right));
        // `p ^ i64::MIN` is an unsigned comparison's operand, as
        // `sign::compare_as_bpftrace` wrote it: a pointer compares unsigned.
        let flipped = op == BinOp::Xor && matches!(right.kind, ExprKind::Int(i64::MIN));
        let allowed = flipped
            || match op {
                BinOp::Add => !(l && r),
                BinOp::Sub => !r,
                _ => op.is_comparison() || !(l || r),
            };
        if allowed {
            return Ok(());
        }
        Err(Error::new(
            span,
            "this operator does not apply to a pointer: compare it, or move it by an integer (`p + 1`, `p - 1`); cast it to take it as an integer, `(uint64)p` (bpftrace refuses it too)",
        ))
    }

    /// `tuple.index`: the type of that element.
    pub(super) fn element(&mut self, tuple: &Expr, index: usize, span: Span) -> Result<Type> {
        let found = self.expr(tuple)?;
        let Type::Tuple(id) = found else {
            return Err(Error::new(
                span,
                format!(
                    "`.{index}` takes an element of a tuple; this is {}",
                    self.type_name(found)
                ),
            ));
        };
        let elements = &self.tuples[usize::from(id)];
        elements.get(index).copied().ok_or_else(|| {
            Error::new(
                span,
                format!(
                    "this tuple has {} elements, .0 to .{}",
                    elements.len(),
                    elements.len() - 1
                ),
            )
        })
    }

    /// `@map[keys]` in an expression: the type of its values.
    pub(super) fn map_read(&mut self, map: &MapRef, span: Span) -> Result<Type> {
        self.keys(map)?;
        self.read_kept(map);
        let info = self.map_info(map)?;
        info.kind.read_type().ok_or_else(|| {
            Error::new(
                span,
                format!(
                    "@{} holds {} and cannot be read in an expression",
                    map.name,
                    info.kind.describe()
                ),
            )
        })
    }

    /// `kstack(N)`, `kstack(MODE[, N])` and their `ustack` forms: the
    /// stack's innermost N frames (`stack_frames`) in a mode of
    /// [`StackMode`].
    pub(super) fn stack(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Type> {
        let (mode, frames) = match args {
            [
                Expr {
                    kind: ExprKind::Str(mode),
                    ..
                },
                rest @ ..,
            ] => (Some(mode.as_str()), rest),
            _ => (None, args),
        };
        if let Some(mode) = mode.filter(|m| StackMode::named(m).is_none()) {
            return Err(Error::new(
                args[0].span,
                format!("`{mode}` is not a stack mode: bpftrace, perf or raw"),
            ));
        }
        if stack_frames(frames).is_none() {
            return Err(Error::new(
                span,
                format!(
                    "{name}() takes a mode and a frame count from 1 to 127: {name}(bpftrace, 5)"
                ),
            ));
        }
        let builtin = if name == "kstack" {
            Builtin::Kstack
        } else {
            Builtin::Ustack
        };
        self.builtin(builtin, span)
    }

    /// `str(field)`: a string the kernel reads as the event happens.
    pub(super) fn string(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (target, rest) = args
            .split_first()
            .ok_or_else(|| Error::new(span, "str() takes a field: str(args.NAME)"))?;
        // The length is any integer (`str(args.buf, args.count)`): the
        // kernel reads the longest string there is room for, and user
        // space cuts it to the length the event gives.
        match rest {
            [] => {}
            [len] => self.want(len, Type::Int, "str()'s length")?,
            [_, extra, ..] => {
                return Err(Error::new(
                    extra.span,
                    "str() takes a string and at most a length: str(args.buf, args.count)",
                ));
            }
        }
        let field = match &target.kind {
            ExprKind::Member { .. } => return self.member(target, true),
            ExprKind::Deref(address) => return self.deref_string(address, target),
            ExprKind::Binary(BinOp::Add | BinOp::Sub, ..)
            | ExprKind::Unary(UnOp::Pointer { .. } | UnOp::Cast { bits: 64, .. }, _) => {
                return self.string_at(target);
            }
            ExprKind::Field(n) => n.clone(),
            ExprKind::Arg(n) => format!("arg{n}"),
            ExprKind::Builtin(Builtin::Retval) => "retval".into(),
            // A map of strings saved where their pointers were
            // (`saved.rs`).
            ExprKind::Map(_) => {
                self.want(target, Type::Str, "the map str() reads")?;
                return Ok(Type::Str);
            }
            _ => {
                return Err(Error::new(
                    target.span,
                    "str() reads a field, argN, retval, a struct member or `*address`: weft reads the string in the kernel when the event happens",
                ));
            }
        };
        let kind = self.field(&field, target.span)?.kind;
        if self.saved.spans.contains(&target.span)
            && kind == (FieldKind::Pointer { constant: false })
        {
            return Err(Error::new(
                target.span,
                format!(
                    "`{field}` points to data the kernel may still write: weft reads a \
                     saved pointer's string where it is saved (in the kernel, as the \
                     event happens), so save `str(args.{field})` where the string is \
                     complete instead"
                ),
            ));
        }
        match kind {
            FieldKind::Chars => self.copy(&field),
            FieldKind::Int | FieldKind::Memory { .. }
                if field.starts_with("arg") || field == "retval" =>
            {
                self.usdt_memory(&field, target.span, true)?;
                self.capture(&field, target.span)?;
            }
            FieldKind::Int | FieldKind::Const(_) => {
                return Err(Error::new(
                    target.span,
                    format!("`{field}` is an integer, not a string pointer"),
                ));
            }
            FieldKind::Unread => return Err(unread(&field, target.span)),
            _ => self.capture(&field, target.span)?,
        }
        Ok(Type::Str)
    }

    /// `strftime(fmt, nsecs)`: a literal format and a time.
    pub(super) fn strftime(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [
            Expr {
                kind: ExprKind::Str(_),
                ..
            },
            ns,
        ] = args
        else {
            return Err(Error::new(
                span,
                "strftime() takes a format and a time: strftime(\"%H:%M:%S\", nsecs)",
            ));
        };
        self.want(ns, Type::Int, "strftime()'s time")?;
        Ok(Type::Str)
    }

    /// `strncmp(s1, s2, n)`: two strings and a literal length.
    pub(super) fn strncmp(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [left, right, len] = args else {
            return Err(Error::new(
                span,
                "strncmp() takes two strings and a length: strncmp(comm, \"bash\", 4)",
            ));
        };
        self.want(left, Type::Str, "strncmp()'s first string")?;
        self.want(right, Type::Str, "strncmp()'s second string")?;
        if !matches!(len.kind, ExprKind::Int(n) if n >= 0) {
            return Err(Error::new(
                len.span,
                "strncmp()'s length must be an integer literal",
            ));
        }
        Ok(Type::Int)
    }

    /// `ntop([family,] addr)`: an IPv4 integer, or the bytes of an
    /// address in a member or field (`__u8 daddr_v6[16]`).
    pub(super) fn ntop(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (family, addr) = match args {
            [addr] => (None, addr),
            [family, addr] => (Some(family), addr),
            _ => {
                return Err(Error::new(
                    span,
                    "ntop() takes an address, after its family if given: ntop(AF_INET, addr)",
                ));
            }
        };
        if let Some(family) = family {
            self.want(family, Type::Int, "ntop()'s address family")?;
        }
        // The sizes of the addresses given as bytes.
        let sizes = match self.array_sizes(addr)? {
            Some(sizes) => sizes,
            None if matches!(addr.kind, ExprKind::Member { .. } | ExprKind::Field(_)) => Vec::new(),
            // `pton()`'s bytes, or a variable holding them.
            None if addr.may_be_bytes() => match self.expr(addr)? {
                Type::Bytes(n) => vec![u16::from(n)],
                found => {
                    self.want_type(addr, found, Type::Int, "ntop()'s address")?;
                    Vec::new()
                }
            },
            None => {
                self.want(addr, Type::Int, "ntop()'s address")?;
                Vec::new()
            }
        };
        if sizes.iter().any(|size| ![4, 16].contains(size)) {
            return Err(Error::new(
                addr.span,
                "ntop() reads an address of 4 bytes (IPv4) or 16 (IPv6)",
            ));
        }
        Ok(Type::Str)
    }

    /// The size of the array `expr` is at each attach point, where it is an
    /// array member or field (`u8 daddr[16]`); none for anything else.
    pub(super) fn array_sizes(&mut self, expr: &Expr) -> Result<Option<Vec<u16>>> {
        Ok(match &expr.kind {
            ExprKind::Member { .. } if self.member(expr, false)? == Type::Str => Some(
                self.attaches
                    .iter()
                    .filter_map(|a| a.member(expr.span).map(|m| m.size))
                    .collect(),
            ),
            ExprKind::Field(name) if self.expr(expr)? == Type::Str => Some(
                self.attaches
                    .iter()
                    .filter_map(|a| a.field(name).map(|f| f.size))
                    .collect(),
            ),
            _ => None,
        })
    }

    /// `macaddr(array)`: a 6-byte array member or field (`h_source` of
    /// `struct ethhdr`) as a MAC address.
    pub(super) fn macaddr(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [addr] = args else {
            return Err(Error::new(span, "macaddr() takes one 6-byte array"));
        };
        let sizes = self.array_sizes(addr)?.unwrap_or_else(|| vec![0]);
        if sizes.iter().any(|size| *size != 6) {
            return Err(Error::new(
                addr.span,
                "macaddr() reads a 6-byte array member or field, as in macaddr($eth->h_source)",
            ));
        }
        Ok(Type::Str)
    }

    /// `buf(pointer[, length])`: the bytes a kernel struct member points
    /// to, up to 64, printed with `%r`.
    pub(super) fn buf(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (data, len) = match args {
            [data] => (data, None),
            [data, len] => (data, Some(len)),
            _ => {
                return Err(Error::new(
                    span,
                    "buf() takes a pointer and a length: buf($skb->data, $skb->len)",
                ));
            }
        };
        if let Some(len) = len {
            self.want(len, Type::Int, "buf()'s length")?;
        }
        let field = match &data.kind {
            // A literal's bytes are known now (`buf("key", 8)`).
            ExprKind::Str(_) => return Ok(Type::Str),
            ExprKind::Member { .. } => None,
            ExprKind::Field(name) => Some(name.clone()),
            ExprKind::Arg(n) => Some(format!("arg{n}")),
            ExprKind::Builtin(Builtin::Retval) => Some("retval".to_string()),
            _ => {
                return Err(Error::new(
                    data.span,
                    "buf() reads where a pointer field, argument or struct member points: buf(args.buf, args.count), buf($skb->data, $skb->len)",
                ));
            }
        };
        if field.is_none() {
            // A member, which the kernel reads in BEGIN and END too.
            self.kernel_reads();
        }
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            match &field {
                Some(name) => members::read_field_bytes(attach, name, data)?,
                None => {
                    members::read_bytes(self.kernel, attach, bound, data)?;
                }
            }
        }
        Ok(Type::Str)
    }

    /// `path(args->file->f_path)`: the file path the kernel's `bpf_d_path`
    /// writes at the event, which it allows in fentry, fexit and iterator
    /// programs (bpftrace's kfunc, kretfunc and iter) only.
    fn path(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [place] = args else {
            return Err(Error::new(
                span,
                "path() takes one struct path: path(args->path), path(args->file->f_path)",
            ));
        };
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            if !matches!(attach.target, Target::Fentry { .. } | Target::Iter { .. }) {
                return Err(Error::new(
                    span,
                    format!(
                        "path() works in fentry, fexit and iterator probes only, where the kernel \
                         allows bpf_d_path, not in {}",
                        attach.target.name()
                    ),
                ));
            }
            members::read_path(self.kernel, attach, bound, place)?;
        }
        Ok(Type::Str)
    }

    /// `skboutput(path, skb, length, offset)`: the packet of a function's
    /// `struct sk_buff *` argument, which the kernel's `bpf_skb_output`
    /// copies at the event (in fentry and fexit probes only, from a pointer
    /// the verifier typed: the argument itself), written by weft into a
    /// pcap file from `offset` to `length`.
    fn skb_output(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [file, skb, length, offset] = args else {
            return Err(Error::new(
                span,
                "skboutput() takes a file, a struct sk_buff, a length and an offset: \
                 skboutput(\"out.pcap\", args->skb, args->skb->len, 0)",
            ));
        };
        if !matches!(file.kind, ExprKind::Str(_)) {
            return Err(Error::new(
                file.span,
                "skboutput()'s file is a string literal",
            ));
        }
        if !matches!(offset.kind, ExprKind::Int(n) if n >= 0) {
            return Err(Error::new(
                offset.span,
                "skboutput()'s offset is a non-negative integer literal",
            ));
        }
        self.want(length, Type::Int, "skboutput()'s length")?;
        if let Some(attach) =
            (self.attaches.iter()).find(|a| !matches!(a.target, Target::Fentry { .. }))
        {
            return Err(Error::new(
                span,
                format!(
                    "skboutput() works in fentry and fexit probes only, where the kernel \
                     allows bpf_skb_output, not in {}",
                    attach.target.name()
                ),
            ));
        }
        let record = (self.kernel.record("struct sk_buff")).map_err(|e| Error::new(span, e))?;
        let len_at = (self.kernel.member(record, "len")).map_err(|e| Error::new(span, e))?;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            let pointer = members::pointer(self.kernel, attach, bound, skb)
                .ok()
                .filter(|p| p.record == record && p.start == Start::Context && p.hops.len() == 1)
                .ok_or_else(|| {
                    Error::new(
                        skb.span,
                        "skboutput() takes a function's struct sk_buff * argument itself \
                         (args->skb): the kernel's bpf_skb_output takes no other pointer",
                    )
                })?;
            let output = SkbOutput {
                arg: u8::try_from(pointer.hops[0] / 8).unwrap_or(u8::MAX),
                len_at: u16::try_from(len_at.offset).unwrap_or(u16::MAX),
            };
            if attach.skb.is_some_and(|other| other != output) {
                return Err(Error::new(
                    skb.span,
                    "a probe's skboutput()s copy one argument's packets",
                ));
            }
            attach.skb = Some(output);
        }
        Ok(Type::Int)
    }

    pub(super) fn call(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Type> {
        match name {
            "str" => self.string(args, span),
            "path" => self.path(args, span),
            "skboutput" => self.skb_output(args, span),
            "ntop" => self.ntop(args, span),
            "pton" => pton(args, span),
            "macaddr" => self.macaddr(args, span),
            "buf" => self.buf(args, span),
            "strncmp" => self.strncmp(args, span),
            "strcontains" => {
                let [haystack, needle] = args else {
                    return Err(Error::new(
                        span,
                        "strcontains() takes two strings: strcontains(str(args.filename), \"log\")",
                    ));
                };
                self.want(haystack, Type::Str, "strcontains()'s first string")?;
                self.want(needle, Type::Str, "strcontains()'s second string")?;
                Ok(Type::Int)
            }
            "strftime" => self.strftime(args, span),
            "kstack" | "ustack" => self.stack(name, args, span),
            "bswap" => {
                let [value] = args else {
                    return Err(Error::new(span, "bswap() takes one integer"));
                };
                self.want(value, Type::Int, "bswap()'s value")?;
                let width = self.width(value);
                self.swaps.insert(span, width);
                Ok(Type::Int)
            }
            "reg" => self.register(args, span),
            // bpftrace's address-space hints, gone before this with one
            // argument (`constants.rs`).
            "kptr" | "uptr" => Err(Error::new(span, format!("{name}() takes one address"))),
            "cgroup_path" => {
                let (id, filter) = match args {
                    [id] => (id, None),
                    [id, filter] => (id, Some(filter)),
                    _ => {
                        return Err(Error::new(
                            span,
                            "cgroup_path() takes a cgroup id and a filter of hierarchies: \
                             cgroup_path(cgroup [, \"unified\"])",
                        ));
                    }
                };
                self.want(id, Type::Int, "cgroup_path()'s cgroup id")?;
                if let Some(filter) = filter
                    && !matches!(filter.kind, ExprKind::Str(_))
                {
                    return Err(Error::new(
                        filter.span,
                        "cgroup_path()'s filter is a string literal (a glob over hierarchies)",
                    ));
                }
                Ok(Type::Str)
            }
            "strerror" => {
                let [errno] = args else {
                    return Err(Error::new(span, "strerror() takes an error number"));
                };
                self.want(errno, Type::Int, "strerror()'s error number")?;
                Ok(Type::Str)
            }
            "usym" | "ksym" => {
                let [addr] = args else {
                    return Err(Error::new(
                        span,
                        format!("{name}() takes one address: {name}(arg0)"),
                    ));
                };
                self.want(addr, Type::Int, &format!("{name}()'s address"))?;
                Ok(Type::Str)
            }
            "count" | "sum" | "avg" | "min" | "max" | "stats" | "hist" | "lhist"
            | "percentiles" => Err(Error::new(
                span,
                format!(
                    "{name}() is an aggregation: assign it to a map, as in @name[key] = {name}(...)"
                ),
            )),
            "printf" | "print" | "clear" | "zero" | "delete" | "exit" | "time" | "join" | "cat"
            | "system" | "signal" | "unwatch" => Err(Error::new(
                span,
                format!("{name}() is a statement and has no value"),
            )),
            _ => Err(Error::new(span, format!("unknown function `{name}`"))),
        }
    }
}

impl Checker<'_> {
    /// The bytes of what `expr` gives, as bpftrace's `sizeof` counts them.
    pub(super) fn size_of(&mut self, expr: &Expr) -> Result<u32> {
        Ok(self.shape(expr)?.0)
    }

    /// The bytes and alignment of what `expr` gives, as bpftrace lays it
    /// out: a string literal's bytes with its NUL, a task name's 16, any
    /// other string's 64 (as `str()` reads), each byte-aligned; a member's
    /// type's; an integer's width; a tuple as a C struct of its elements,
    /// each at its alignment, the whole a multiple of the widest.
    pub(super) fn shape(&mut self, expr: &Expr) -> Result<(u32, u32)> {
        let ty = match &expr.kind {
            ExprKind::Str(text) => return Ok((text.len() as u32 + 1, 1)),
            ExprKind::Builtin(Builtin::Comm) => return Ok((16, 1)),
            ExprKind::Tuple(elements) => {
                let (mut size, mut align) = (0u32, 1u32);
                for element in elements {
                    let (bytes, aligned) = self.shape(element)?;
                    size = size.next_multiple_of(aligned) + bytes;
                    align = align.max(aligned);
                }
                return Ok((size.next_multiple_of(align), align));
            }
            ExprKind::Var(name) if self.tuple_shapes.contains_key(name) => {
                return Ok(self.tuple_shapes[name]);
            }
            ExprKind::Member { .. } => {
                let attach = self.attaches.first().ok_or_else(|| {
                    Error::new(expr.span, "a member needs a probe the kernel fires")
                })?;
                let bound = &self.bound[0];
                members::member_type(self.kernel, attach, bound, expr)?
            }
            // `sizeof(*args->rqtp)`: the struct pointed to.
            ExprKind::Deref(address) if let Some(id) = self.pointee_record(address) => {
                KernelType::Record(id)
            }
            // `sizeof($s->a[1])`: a row of an array of arrays.
            ExprKind::Deref(address) if let Some(row) = self.row_type(address) => row,
            _ => {
                // Typed, not evaluated: what typing it asked the kernel to
                // read at each event (a string, a field) is dropped again.
                let asked = self.attaches.to_vec();
                let ty = self.expr(expr)?;
                self.attaches.clone_from_slice(&asked);
                return match ty {
                    Type::Int => {
                        let width = u32::from(self.width(expr));
                        Ok((width, width))
                    }
                    Type::Str => Ok((weft_abi::oneliner::STRING_LEN as u32, 1)),
                    Type::Bytes(n) => Ok((u32::from(n), 1)),
                    Type::Composite(id) => Ok((self.composites[usize::from(id)].size(), 1)),
                    Type::Tuple(_) => Err(Error::new(
                        expr.span,
                        "sizeof(): weft lays out a tuple written in place or held in a \
                         variable, not one read from a map",
                    )),
                };
            }
        };
        match ty {
            KernelType::Int { size, .. } => Ok((u32::from(size), u32::from(size))),
            KernelType::Pointer(_) => Ok((8, 8)),
            KernelType::Chars(n) => Ok((u32::from(n), 1)),
            KernelType::Record(id) => {
                Ok((self.kernel.record_size(id), self.kernel.record_align(id)))
            }
            KernelType::Array {
                element,
                stride,
                count,
            } => {
                let align = match element {
                    Element::Int { size, .. } | Element::Row { size, .. } => u32::from(size),
                    Element::Pointer(_) => 8,
                    Element::Record(id) => self.kernel.record_align(id),
                };
                Ok((stride.saturating_mul(count), align))
            }
            KernelType::Other => Err(Error::new(
                expr.span,
                "sizeof(): weft does not know this member's type's size",
            )),
            KernelType::Bits { .. } => Err(Error::new(
                expr.span,
                "sizeof(): a bit-field has no size of its own",
            )),
        }
    }

    /// The type of `*address` when it is a row of an array of arrays
    /// (`a[1]` in `a[1][2]`), at the first attach point.
    fn row_type(&self, address: &Expr) -> Option<KernelType> {
        let (attach, bound) = self.attaches.first().zip(self.bound.first())?;
        members::row(self.kernel, attach, bound, address)
    }

    /// The struct or union `address` points to, where it is a typed
    /// pointer: a tracepoint's field, a member, a struct cast.
    fn pointee_record(&self, address: &Expr) -> Option<u32> {
        let attach = self.attaches.first()?;
        match &address.kind {
            ExprKind::Field(name) => self
                .kernel
                .record(attach.field(name)?.pointee.as_deref()?)
                .ok(),
            ExprKind::StructCast(name, _) => self.kernel.record(name).ok(),
            ExprKind::Member { .. } => {
                match members::member_type(self.kernel, attach, self.bound.first()?, address) {
                    Ok(KernelType::Pointer(record)) => record,
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The bytes of the integer `expr` gives, as bpftrace types it: its
    /// member's or field's size, its cast's, its variable's; else 8.
    pub(super) fn width(&self, expr: &Expr) -> u16 {
        let first = self.attaches.first();
        match &expr.kind {
            ExprKind::Member { .. } => first
                .and_then(|a| a.member(expr.span))
                .map_or(8, |m| m.size),
            ExprKind::Field(name) => first.and_then(|a| a.field(name)).map_or(8, |f| f.size),
            ExprKind::Unary(UnOp::Cast { bits, .. }, _) => u16::from(*bits) / 8,
            ExprKind::Deref(address) => match first.zip(self.bound.first()).map_or_else(
                || address.pointee(),
                |(attach, bound)| members::pointee(self.kernel, attach, bound, address),
            ) {
                UnOp::Cast { bits, .. } => u16::from(bits) / 8,
                _ => 8,
            },
            ExprKind::Var(name) => self.widths.get(name).copied().unwrap_or(8),
            ExprKind::Call(name, args) if name == "bswap" => {
                args.first().map_or(8, |value| self.width(value))
            }
            _ => 8,
        }
    }
}
