//! Text to [`Program`]: a recursive-descent parser over the on-demand lexer.

mod definitions;

use std::collections::HashMap;

use crate::{
    ast::{
        BinOp, Builtin, Definitions, Expr, ExprKind, Item, MapRef, PerfEvent, Probe, ProbeKind,
        Program, SizeOf, Stmt, TIME_UNITS, UnOp,
    },
    error::{Error, Result, Span},
    lex::{Lexer, Token},
};

/// Parses a whole program (a script's preprocessor lines read first),
/// given no positional parameters.
pub fn parse(text: &str) -> Result<Program> {
    parse_with(text, &[])
}

/// Parses a whole program whose positional parameters (`$1`, `$2`, ...)
/// are `params`: their values take their places, in probes too.
pub fn parse_with(text: &str, params: &[String]) -> Result<Program> {
    let preprocessed = crate::preprocess::preprocess(text)?;
    let mut parser = Parser::new(&preprocessed.text, params);
    let mut items = Vec::new();
    let mut definitions = Definitions::default();
    while !parser.lexer.at_end()? {
        if parser.at_definition()? {
            parser.definition(&mut definitions)?;
        } else {
            items.push(parser.item()?);
        }
    }
    if items.is_empty() {
        return Err(Error::new(Span::new(0, 0), "the program has no probes"));
    }
    let mut defines = HashMap::new();
    for (name, value) in preprocessed.defines {
        defines.insert(name, define(text, value)?);
    }
    for (name, value) in &defines {
        if names(value, &defines, name, 0) {
            return Err(Error::new(
                value.span,
                format!("#define {name} names itself, directly or through other defines"),
            ));
        }
    }
    let mut program = Program {
        items,
        defines,
        definitions,
        unsafe_calls: false,
        all_fields: false,
        pid: None,
        command: None,
    };
    crate::params::substitute(&mut program, params)?;
    Ok(program)
}

/// Whether `expr` names the define `name`, directly or through the
/// defines it names (at most as deep as there are defines).
fn names(expr: &Expr, defines: &HashMap<String, Expr>, name: &str, depth: usize) -> bool {
    if depth > defines.len() {
        return true;
    }
    if let ExprKind::Constant(used) = &expr.kind {
        if used == name {
            return true;
        }
        if let Some(value) = defines.get(used)
            && names(value, defines, name, depth + 1)
        {
            return true;
        }
    }
    expr.children()
        .into_iter()
        .any(|child| names(child, defines, name, depth))
}

/// The expression of a `#define`'s value at `value` in `text`, parsed
/// where it stands so that its spans point there.
fn define(text: &str, value: Span) -> Result<Expr> {
    let mut alone = " ".repeat(value.start);
    alone.push_str(&text[value.start..value.start + value.len]);
    let mut parser = Parser::new(&alone, &[]);
    let expr = parser.expr()?;
    if !parser.lexer.at_end()? {
        let (token, span) = parser.peek()?;
        return Err(Error::new(
            span,
            format!(
                "expected the end of the #define's value, found {}",
                token.describe()
            ),
        ));
    }
    Ok(expr)
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    /// Inside `/.../` a `/` at the top level closes the predicate rather
    /// than dividing; division needs parentheses there.
    in_predicate: bool,
    /// How many `while` loops enclose the statement being parsed, for
    /// `break` and `continue`.
    loops: usize,
    /// The positional parameters, for probes that name them.
    params: &'a [String],
    /// The variables of the probe being parsed that hold a pointer to an
    /// integer (`$p = (int64 *)arg0`), by the cast: `$p + 1` steps whole
    /// integers, as a variable's type is its first value's in bpftrace.
    int_pointers: std::collections::HashMap<String, UnOp>,
    /// The maps that hold a pointer to an integer, the same way; a map's
    /// type is the program's, not a probe's.
    map_pointers: std::collections::HashMap<String, UnOp>,
}

/// bpftrace's bounds on `unroll(n)`.
const UNROLL: std::ops::RangeInclusive<i64> = 1..=100;

/// Binary operators by precedence, loosest first.
const LEVELS: [&[(&str, BinOp)]; 10] = [
    &[("||", BinOp::LogicalOr)],
    &[("&&", BinOp::LogicalAnd)],
    &[("|", BinOp::Or)],
    &[("^", BinOp::Xor)],
    &[("&", BinOp::And)],
    &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
    &[
        ("<", BinOp::Lt),
        ("<=", BinOp::Le),
        (">", BinOp::Gt),
        (">=", BinOp::Ge),
    ],
    &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
    &[("+", BinOp::Add), ("-", BinOp::Sub)],
    &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
];

/// Compound assignments and the operator each applies.
const UPDATES: [(&str, BinOp); 10] = [
    ("<<=", BinOp::Shl),
    (">>=", BinOp::Shr),
    ("+=", BinOp::Add),
    ("-=", BinOp::Sub),
    ("*=", BinOp::Mul),
    ("/=", BinOp::Div),
    ("%=", BinOp::Rem),
    ("&=", BinOp::And),
    ("|=", BinOp::Or),
    ("^=", BinOp::Xor),
];

impl<'a> Parser<'a> {
    fn new(text: &'a str, params: &'a [String]) -> Self {
        Self {
            lexer: Lexer::new(text),
            in_predicate: false,
            loops: 0,
            params,
            int_pointers: std::collections::HashMap::new(),
            map_pointers: std::collections::HashMap::new(),
        }
    }

    fn peek(&self) -> Result<(Token, Span)> {
        self.lexer.peek()
    }

    fn next(&mut self) -> Result<(Token, Span)> {
        self.lexer.token()
    }

    /// Consumes punctuation `p` if it comes next.
    fn eat(&mut self, p: &str) -> Result<bool> {
        if matches!(self.peek()?.0, Token::Punct(q) if q == p) {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect(&mut self, p: &str) -> Result<Span> {
        let (token, span) = self.next()?;
        if token == Token::Punct(static_punct(p)) {
            return Ok(span);
        }
        Err(Error::new(
            span,
            format!("expected `{p}`, found {}", token.describe()),
        ))
    }

    fn item(&mut self) -> Result<Item> {
        self.int_pointers.clear();
        let mut probes = vec![self.probe()?];
        while self.eat(",")? {
            probes.push(self.probe()?);
        }
        let predicate = if self.eat("/")? {
            self.in_predicate = true;
            let expr = self.expr()?;
            self.in_predicate = false;
            self.expect("/")?;
            Some(expr)
        } else {
            None
        };
        let body = self.block()?;
        Ok(Item {
            probes,
            predicate,
            body,
        })
    }

    fn probe(&mut self) -> Result<Probe> {
        let (text, span) = self.lexer.probe()?;
        let text = crate::params::in_probe(&text, self.params)
            .map_err(|message| Error::new(span, message))?;
        let kind = probe_kind(&text).map_err(|message| Error::new(span, message))?;
        Ok(Probe { kind, span })
    }

    /// `{ stmt; stmt; ... }`; the last `;` is optional.
    fn block(&mut self) -> Result<Vec<Stmt>> {
        self.expect("{")?;
        let mut stmts = Vec::new();
        loop {
            if self.eat("}")? {
                return Ok(stmts);
            }
            if self.eat(";")? {
                continue;
            }
            let stmt = self.stmt()?;
            let is_block = matches!(stmt, Stmt::If { .. } | Stmt::While { .. });
            stmts.push(stmt);
            if !is_block && !self.eat(";")? {
                let (token, span) = self.peek()?;
                if token != Token::Punct("}") {
                    return Err(Error::new(
                        span,
                        format!("expected `;` or `}}`, found {}", token.describe()),
                    ));
                }
            }
        }
    }

    fn stmt(&mut self) -> Result<Stmt> {
        let (token, span) = self.peek()?;
        match token {
            Token::Ident(word) if word == "if" => {
                self.next()?;
                self.if_stmt()
            }
            Token::Ident(word) if word == "while" => {
                self.next()?;
                self.expect("(")?;
                let cond = self.expr()?;
                self.expect(")")?;
                self.loops += 1;
                let body = self.block();
                self.loops -= 1;
                Ok(Stmt::While { cond, body: body? })
            }
            Token::Ident(word) if word == "unroll" => {
                self.next()?;
                self.unroll()
            }
            Token::Ident(word) if word == "break" || word == "continue" => {
                self.next()?;
                if self.loops == 0 {
                    return Err(Error::new(
                        span,
                        format!("`{word}` is only allowed inside a `while` loop"),
                    ));
                }
                Ok(if word == "break" {
                    Stmt::Break
                } else {
                    Stmt::Continue
                })
            }
            Token::Map(_) | Token::Var(_) if !self.assigns()? => {
                let expr = self.expr()?;
                Ok(self.updating(expr))
            }
            Token::Map(_) => {
                let map = self.map_ref()?;
                if self.eat("=")? {
                    let value = self.expr()?;
                    if let ExprKind::Unary(pointer @ UnOp::Pointer { .. }, _) = value.kind {
                        self.map_pointers.entry(map.name.clone()).or_insert(pointer);
                    }
                    return Ok(Stmt::MapAssign { map, value });
                }
                let (op, value) = self.update(span)?;
                let value = scaled(self.map_pointers.get(&map.name), op, value);
                Ok(Stmt::MapUpdate { map, op, value })
            }
            Token::Var(name) => {
                self.next()?;
                // A statement that starts with a variable assigns it.
                if name == "#" || name.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Error::new(
                        span,
                        format!("${name} is a positional parameter: it cannot be assigned"),
                    ));
                }
                if self.eat("=")? {
                    let value = self.expr()?;
                    let pointer = match &value.kind {
                        ExprKind::Unary(pointer @ UnOp::Pointer { .. }, _) => Some(*pointer),
                        // A copy of a variable or map holding one.
                        ExprKind::Var(_) | ExprKind::Map(_) => match self.typed(value.clone()).kind
                        {
                            ExprKind::Unary(pointer, _) => Some(pointer),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(pointer) = pointer {
                        self.int_pointers.entry(name.clone()).or_insert(pointer);
                    }
                    return Ok(Stmt::VarAssign { name, span, value });
                }
                let (op, value) = self.update(span)?;
                let value = scaled(self.int_pointers.get(&name), op, value);
                Ok(Stmt::VarUpdate {
                    name,
                    span,
                    op,
                    value,
                })
            }
            _ => {
                let expr = self.expr()?;
                Ok(self.updating(expr))
            }
        }
    }

    /// Whether the statement at the map or variable ahead assigns it (or
    /// steps it); else it is an expression (`$x > 5 ? printf(..) : ..;`).
    fn assigns(&self) -> Result<bool> {
        let mut ahead = Self {
            lexer: self.lexer.clone(),
            in_predicate: false,
            loops: self.loops,
            params: self.params,
            int_pointers: std::collections::HashMap::new(),
            map_pointers: std::collections::HashMap::new(),
        };
        if matches!(ahead.peek()?.0, Token::Map(_)) {
            ahead.map_ref()?;
        } else {
            ahead.next()?;
        }
        Ok(match ahead.peek()?.0 {
            Token::Punct(p) => {
                ["=", "++", "--"].contains(&p) || UPDATES.iter().any(|(q, _)| *q == p)
            }
            _ => false,
        })
    }

    /// After a map or variable: `++`, `--` or a compound assignment.
    fn update(&mut self, target: Span) -> Result<(BinOp, Expr)> {
        let (token, span) = self.next()?;
        let one = |op| {
            Ok((
                op,
                Expr {
                    kind: ExprKind::Int(1),
                    span,
                },
            ))
        };
        match token {
            Token::Punct("++") => one(BinOp::Add),
            Token::Punct("--") => one(BinOp::Sub),
            Token::Punct(p) if UPDATES.iter().any(|(q, _)| *q == p) => {
                let op = UPDATES.iter().find(|(q, _)| *q == p).expect("found").1;
                Ok((op, self.expr()?))
            }
            other => Err(Error::new(
                span.to(target).to(span),
                format!(
                    "expected `=`, `++`, `--` or `+=` after the assignment target, found {}",
                    other.describe()
                ),
            )),
        }
    }

    /// `unroll(n) { ... }`: n copies of the block, under a true `if` so
    /// that they stay one statement.
    fn unroll(&mut self) -> Result<Stmt> {
        self.expect("(")?;
        let (token, span) = self.next()?;
        // A positional parameter counts too (`unroll($1)`), as its number.
        let count = match &token {
            Token::Int(n) => Some(*n),
            Token::Var(name) => name
                .parse::<usize>()
                .ok()
                .and_then(|n| self.params.get(n.checked_sub(1)?))
                .and_then(|word| crate::params::c_integer(word)),
            _ => None,
        };
        let times = match count {
            Some(n) if UNROLL.contains(&n) => n,
            _ => {
                // bpftrace's words for a count out of range.
                let bound = match count {
                    Some(n) if n > *UNROLL.end() => {
                        format!(": unroll maximum value is {}", UNROLL.end())
                    }
                    Some(_) => format!(": unroll minimum value is {}", UNROLL.start()),
                    None => String::new(),
                };
                return Err(Error::new(
                    span,
                    format!(
                        "unroll() takes a count from {} to {}, found {}{bound}",
                        UNROLL.start(),
                        UNROLL.end(),
                        token.describe()
                    ),
                ));
            }
        };
        self.expect(")")?;
        let body = self.block()?;
        let times = usize::try_from(times).expect("within UNROLL");
        Ok(Stmt::If {
            cond: Expr {
                kind: ExprKind::Int(1),
                span,
            },
            then: std::iter::repeat_n(body, times).flatten().collect(),
            otherwise: Vec::new(),
        })
    }

    fn if_stmt(&mut self) -> Result<Stmt> {
        self.expect("(")?;
        let cond = self.expr()?;
        self.expect(")")?;
        let then = self.block()?;
        let otherwise = if matches!(&self.peek()?.0, Token::Ident(w) if w == "else") {
            self.next()?;
            if matches!(&self.peek()?.0, Token::Ident(w) if w == "if") {
                self.next()?;
                vec![self.if_stmt()?]
            } else {
                self.block()?
            }
        } else {
            Vec::new()
        };
        Ok(Stmt::If {
            cond,
            then,
            otherwise,
        })
    }

    fn map_ref(&mut self) -> Result<MapRef> {
        let (Token::Map(name), mut span) = self.next()? else {
            unreachable!("called on a map token")
        };
        let mut keys = Vec::new();
        if self.eat("[")? {
            // Keys are full expressions, division included.
            let outer = std::mem::replace(&mut self.in_predicate, false);
            keys = self.list("]")?;
            self.in_predicate = outer;
            span = span.to(Span::new(self.lexer.pos() - 1, 1));
        }
        Ok(MapRef { name, keys, span })
    }

    /// Comma-separated expressions up to the closing `close`.
    fn list(&mut self, close: &str) -> Result<Vec<Expr>> {
        let mut out = Vec::new();
        if self.eat(close)? {
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            if self.eat(close)? {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }

    fn expr(&mut self) -> Result<Expr> {
        let cond = self.binary(0)?;
        if !self.eat("?")? {
            return Ok(cond);
        }
        let then = self.expr()?;
        self.expect(":")?;
        let otherwise = self.expr()?;
        let span = cond.span.to(otherwise.span);
        Ok(Expr {
            kind: ExprKind::Ternary(Box::new(cond), Box::new(then), Box::new(otherwise)),
            span,
        })
    }

    fn binary(&mut self, level: usize) -> Result<Expr> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        loop {
            let (token, _) = self.peek()?;
            let Token::Punct(p) = token else {
                return Ok(left);
            };
            let Some(&(_, op)) = LEVELS[level].iter().find(|(q, _)| *q == p) else {
                return Ok(left);
            };
            if op == BinOp::Div && self.in_predicate {
                return Ok(left);
            }
            self.next()?;
            let mut right = self.binary(level + 1)?;
            // A variable holding a pointer to an integer steps as the cast
            // (and a pointer minus one is a difference of addresses).
            if matches!(op, BinOp::Add | BinOp::Sub) {
                left = self.typed(left);
                right = self.typed(right);
            }
            left = binary(op, left, right);
        }
    }

    /// `expr`, as the pointer cast it holds when it is a variable holding
    /// a pointer to an integer.
    fn typed(&self, expr: Expr) -> Expr {
        let pointer = match &expr.kind {
            ExprKind::Var(name) => self.int_pointers.get(name).copied(),
            ExprKind::Map(map) => self.map_pointers.get(&map.name).copied(),
            _ => None,
        };
        match pointer {
            Some(pointer) => Expr {
                span: expr.span,
                kind: ExprKind::Unary(pointer, Box::new(expr)),
            },
            None => expr,
        }
    }

    /// An expression as a statement: `++$x;` is an update like `$x++;`,
    /// whose value nothing reads.
    fn updating(&self, expr: Expr) -> Stmt {
        let target = match expr.kind {
            ExprKind::Step { target, op, .. } => (target, op),
            // `c ? printf(..) : printf(..);` runs one call, as an `if`.
            ExprKind::Ternary(cond, then, otherwise) => {
                return Stmt::If {
                    cond: *cond,
                    then: vec![self.updating(*then)],
                    otherwise: vec![self.updating(*otherwise)],
                };
            }
            ExprKind::Call(..) => return Stmt::Expr(expr),
            // A value nothing keeps (`args->rqtp->tv_sec;`) is still
            // checked and read, as bpftrace does: into a variable no
            // program can name.
            _ => {
                return Stmt::VarAssign {
                    name: format!(" unused {}", expr.span.start),
                    span: expr.span,
                    value: expr,
                };
            }
        };
        let (target, op) = target;
        let one = Expr {
            kind: ExprKind::Int(1),
            span: expr.span,
        };
        match target.kind {
            ExprKind::Map(map) => Stmt::MapUpdate {
                value: scaled(self.map_pointers.get(&map.name), op, one),
                map,
                op,
            },
            ExprKind::Var(name) => Stmt::VarUpdate {
                value: scaled(self.int_pointers.get(&name), op, one),
                name,
                span: target.span,
                op,
            },
            _ => unreachable!("stepped() takes variables and maps only"),
        }
    }

    fn unary(&mut self) -> Result<Expr> {
        let (token, span) = self.peek()?;
        if let Token::Punct(p @ ("++" | "--")) = token {
            self.next()?;
            let target = self.unary()?;
            return stepped(target, p, false, span);
        }
        if token == Token::Punct("*") {
            self.next()?;
            let address = self.unary()?;
            return Ok(Expr {
                span: span.to(address.span),
                kind: ExprKind::Deref(Box::new(address)),
            });
        }
        let op = match token {
            Token::Punct("!") => UnOp::Not,
            Token::Punct("-") => UnOp::Neg,
            Token::Punct("~") => UnOp::BitNot,
            _ => return self.primary(),
        };
        self.next()?;
        let operand = self.unary()?;
        let span = span.to(operand.span);
        Ok(Expr {
            kind: ExprKind::Unary(op, Box::new(operand)),
            span,
        })
    }

    /// An atom, then any `->NAME` and `.NAME` (kernel struct members), or
    /// `++` or `--` after a variable or map.
    fn primary(&mut self) -> Result<Expr> {
        let mut expr = self.atom()?;
        loop {
            // `p[i]` is `*(p + i)`, stepped by what `p` points to.
            // (A map's own `[keys]` are its atom's: a `[` after is an index.)
            if self.eat("[")? {
                let outer = std::mem::replace(&mut self.in_predicate, false);
                let index = self.expr()?;
                self.in_predicate = outer;
                let span = expr.span.to(self.expect("]")?);
                // A variable or map holding a pointer to an integer steps
                // whole integers (`@p[0][2]`).
                let base = self.typed(expr);
                let mut address = binary(BinOp::Add, base, index);
                address.span = span;
                expr = Expr {
                    kind: ExprKind::Deref(Box::new(address)),
                    span,
                };
                continue;
            }
            let arrow = if self.eat("->")? {
                true
            } else if self.eat(".")? {
                false
            } else {
                if let (Token::Punct(p @ ("++" | "--")), span) = self.peek()?
                    && matches!(expr.kind, ExprKind::Var(_) | ExprKind::Map(_))
                {
                    self.next()?;
                    return stepped(expr, p, true, span);
                }
                return Ok(expr);
            };
            let (token, name_span) = self.next()?;
            if let (Token::Int(index), false) = (&token, arrow) {
                let index = usize::try_from(*index)
                    .map_err(|_| Error::new(name_span, "a tuple's elements are numbered from 0"))?;
                let span = expr.span.to(name_span);
                expr = Expr {
                    kind: ExprKind::Element {
                        tuple: Box::new(expr),
                        index,
                    },
                    span,
                };
                continue;
            }
            let Token::Ident(name) = token else {
                return Err(Error::new(
                    name_span,
                    format!("expected a member name, found {}", token.describe()),
                ));
            };
            let span = expr.span.to(name_span);
            // `(*p).m` is `p->m`, as in C (an indexed element, `a[i].m`,
            // stays one).
            let (base, arrow) = match expr.kind {
                ExprKind::Deref(pointer)
                    if !arrow && !matches!(pointer.kind, ExprKind::Binary(..)) =>
                {
                    (*pointer, true)
                }
                kind => (
                    Expr {
                        kind,
                        span: expr.span,
                    },
                    arrow,
                ),
            };
            expr = Expr {
                kind: ExprKind::Member {
                    base: Box::new(base),
                    name,
                    arrow,
                },
                span,
            };
        }
    }

    fn atom(&mut self) -> Result<Expr> {
        let (token, span) = self.peek()?;
        let kind = match token {
            Token::Map(_) => {
                let map = self.map_ref()?;
                let span = map.span;
                return Ok(Expr {
                    kind: ExprKind::Map(map),
                    span,
                });
            }
            Token::Int(n) => ExprKind::Int(n),
            Token::Str(s) => ExprKind::Str(s),
            Token::Var(v) => ExprKind::Var(v),
            Token::Punct("(") => {
                self.next()?;
                if let Some(cast) = self.cast()? {
                    let operand = self.unary()?;
                    let span = span.to(operand.span);
                    let operand = Box::new(operand);
                    let kind = match cast {
                        Cast::Int(op) => ExprKind::Unary(op, operand),
                        Cast::Struct(name) => ExprKind::StructCast(name, operand),
                    };
                    return Ok(Expr { kind, span });
                }
                let outer = std::mem::replace(&mut self.in_predicate, false);
                let mut inner = self.expr()?;
                if self.eat(",")? {
                    // A tuple: `(a, b, ...)`.
                    let mut elements = vec![inner];
                    elements.extend(self.list(")")?);
                    let end = Span::new(self.lexer.pos() - 1, 1);
                    if elements.len() < 2 {
                        return Err(Error::new(span.to(end), "a tuple has two or more elements"));
                    }
                    inner = Expr {
                        kind: ExprKind::Tuple(elements),
                        span: span.to(end),
                    };
                } else {
                    self.expect(")")?;
                }
                self.in_predicate = outer;
                return Ok(inner);
            }
            Token::Ident(word) => return self.word(word, span),
            other => {
                return Err(Error::new(
                    span,
                    format!("expected an expression, found {}", other.describe()),
                ));
            }
        };
        self.next()?;
        Ok(Expr { kind, span })
    }

    /// After `sizeof(`: a type (`struct NAME`, `union NAME`, an integer
    /// type) or an expression, and `)`.
    fn sizeof(&mut self) -> Result<SizeOf> {
        if let (Token::Ident(word), span) = self.peek()? {
            if word == "struct" || word == "union" {
                let (name, name_span) = self.record_name()?;
                if self.eat("*")? {
                    return Err(Error::new(
                        span.to(name_span),
                        "sizeof() of a pointer type: a pointer is 8 bytes",
                    ));
                }
                self.expect(")")?;
                return Ok(SizeOf::Type(name));
            }
            if UnOp::cast(&word).is_some() {
                self.next()?;
                self.expect(")")?;
                return Ok(SizeOf::Type(word));
            }
        }
        let outer = std::mem::replace(&mut self.in_predicate, false);
        let measured = self.expr()?;
        self.in_predicate = outer;
        self.expect(")")?;
        Ok(SizeOf::Expr(Box::new(measured)))
    }

    /// `struct NAME` or `union NAME`, at the keyword: the whole name, and
    /// where NAME is.
    fn record_name(&mut self) -> Result<(String, Span)> {
        let (Token::Ident(keyword), _) = self.next()? else {
            unreachable!("called at `struct` or `union`")
        };
        let (token, name_span) = self.next()?;
        let Token::Ident(name) = token else {
            return Err(Error::new(
                name_span,
                format!("expected the {keyword}'s name, found {}", token.describe()),
            ));
        };
        Ok((format!("{keyword} {name}"), name_span))
    }

    /// After `(`: an integer type and `)` make a cast (`(int8)retval`),
    /// and so do `struct NAME *` and `union NAME *` (`(struct sock *)arg0`).
    fn cast(&mut self) -> Result<Option<Cast>> {
        let (Token::Ident(word), _) = self.peek()? else {
            return Ok(None);
        };
        let cast = if let Some(UnOp::Cast { bits, signed }) = UnOp::cast(&word) {
            self.next()?;
            if self.eat("*")? {
                Cast::Int(UnOp::Pointer { bits, signed })
            } else {
                Cast::Int(UnOp::Cast { bits, signed })
            }
        } else if word == "struct" || word == "union" {
            let (name, _) = self.record_name()?;
            self.expect("*")?;
            Cast::Struct(name)
        } else {
            return Ok(None);
        };
        self.expect(")")?;
        Ok(Some(cast))
    }

    /// A builtin, `args.field`, `argN` or a call.
    fn word(&mut self, word: String, span: Span) -> Result<Expr> {
        self.next()?;
        if word == "sizeof" && self.eat("(")? {
            let measured = self.sizeof()?;
            let span = span.to(Span::new(self.lexer.pos() - 1, 1));
            return Ok(Expr {
                kind: ExprKind::SizeOf(measured),
                span,
            });
        }
        if self.eat("(")? {
            let outer = std::mem::replace(&mut self.in_predicate, false);
            let args = self.list(")")?;
            self.in_predicate = outer;
            let span = span.to(Span::new(self.lexer.pos() - 1, 1));
            return Ok(Expr {
                kind: ExprKind::Call(word, args),
                span,
            });
        }
        // An iterator's context (`ctx->task`) is its fields, as `args`.
        if word == "args" || word == "ctx" {
            if !(self.eat(".")? || self.eat("->")?) {
                return Err(Error::new(
                    span,
                    "`args` needs a field: `args.NAME` (or `args->NAME`)",
                ));
            }
            let (field, field_span) = self.next()?;
            let Token::Ident(field) = field else {
                return Err(Error::new(
                    field_span,
                    format!("expected a field name, found {}", field.describe()),
                ));
            };
            return Ok(Expr {
                kind: ExprKind::Field(field),
                span: span.to(field_span),
            });
        }
        if let Some(n) = word.strip_prefix("sarg").and_then(|n| n.parse::<u8>().ok()) {
            return Ok(stack_argument(n, span));
        }
        if let Some(n) = word.strip_prefix("arg").and_then(|n| n.parse::<u8>().ok()) {
            return Ok(Expr {
                kind: ExprKind::Arg(n),
                span,
            });
        }
        match Builtin::from_name(&word) {
            Some(builtin) => Ok(Expr {
                kind: ExprKind::Builtin(builtin),
                span,
            }),
            None => Ok(Expr {
                kind: ExprKind::Constant(word),
                span,
            }),
        }
    }
}

/// What a cast makes of its operand.
enum Cast {
    /// Keeps the integer's low bits.
    Int(UnOp),
    /// A pointer to the kernel type named (`struct sock`).
    Struct(String),
}

/// A probe's target split at its `:`s, each part unquoted as bpftrace
/// takes it: a quoted stretch may hold `:` or blanks, and `\"` or `\\`
/// (`usdt:PATH:test:"\"probe1\""` names the probe `"probe1"`; `"fn"+4`).
fn probe_parts(target: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = target.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        let part = parts.last_mut().expect("one part at least");
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => part.extend(chars.next()),
            ':' if !quoted => parts.push(String::new()),
            _ => part.push(c),
        }
    }
    parts
}

/// `sargN`, argument N on the stack of a kprobe or uprobe (x86-64: past
/// the six in registers), as bpftrace reads it: `*(int64 *)(reg("sp") +
/// 8 * (N + 1))`, the return address being at the stack pointer.
fn stack_argument(n: u8, span: Span) -> Expr {
    let at = |kind| Expr { kind, span };
    let sp = at(ExprKind::Call(
        "reg".into(),
        vec![at(ExprKind::Str("sp".into()))],
    ));
    let offset = at(ExprKind::Int(8 * (i64::from(n) + 1)));
    let address = at(ExprKind::Binary(BinOp::Add, Box::new(sp), Box::new(offset)));
    let int64 = UnOp::Pointer {
        bits: 64,
        signed: true,
    };
    at(ExprKind::Deref(Box::new(at(ExprKind::Unary(
        int64,
        Box::new(address),
    )))))
}

/// `left op right`. A pointer to an integer plus or minus a number moves
/// by whole integers, as in C and bpftrace: `(int64 *)p + 1` is 8 bytes on,
/// and still an `int64 *`.
pub(crate) fn binary(op: BinOp, left: Expr, right: Expr) -> Expr {
    let span = left.span.to(right.span);
    let is_pointer = |e: &Expr| matches!(e.kind, ExprKind::Unary(UnOp::Pointer { .. }, _));
    if op == BinOp::Add && is_pointer(&right) && !is_pointer(&left) {
        // `1 + p` moves as `p + 1` does.
        let mut sum = binary(op, right, left);
        sum.span = span;
        return sum;
    }
    // Two pointers are left to the checker, which refuses them as bpftrace does.
    let pointer = match (op, &left.kind, &right.kind) {
        (_, _, ExprKind::Unary(UnOp::Pointer { .. }, _)) => None,
        (BinOp::Add | BinOp::Sub, ExprKind::Unary(p @ UnOp::Pointer { bits, .. }, _), _) => {
            Some((*p, i64::from(*bits / 8)))
        }
        _ => None,
    };
    let Some((pointer, size)) = pointer else {
        return Expr {
            kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
            span,
        };
    };
    let size = Expr {
        kind: ExprKind::Int(size),
        span: right.span,
    };
    let step = Expr {
        span: right.span,
        kind: ExprKind::Binary(BinOp::Mul, Box::new(right), Box::new(size)),
    };
    let moved = Expr {
        kind: ExprKind::Binary(op, Box::new(left), Box::new(step)),
        span,
    };
    Expr {
        kind: ExprKind::Unary(pointer, Box::new(moved)),
        span,
    }
}

/// `++target`, `target--` and the like (`punct` the operator, at `span`):
/// the target must be a variable or a map element.
fn stepped(target: Expr, punct: &str, post: bool, span: Span) -> Result<Expr> {
    if !matches!(target.kind, ExprKind::Var(_) | ExprKind::Map(_)) {
        return Err(Error::new(
            span.to(target.span),
            format!("`{punct}` takes a variable or a map element"),
        ));
    }
    let op = if punct == "++" {
        BinOp::Add
    } else {
        BinOp::Sub
    };
    Ok(Expr {
        span: span.to(target.span),
        kind: ExprKind::Step {
            target: Box::new(target),
            op,
            post,
        },
    })
}

/// `value` as what `op` adds to or takes from a pointer to an integer
/// (`pointer`, when the target holds one): whole integers, as in C.
fn scaled(pointer: Option<&UnOp>, op: BinOp, value: Expr) -> Expr {
    let Some(UnOp::Pointer { bits, .. }) = pointer else {
        return value;
    };
    if !matches!(op, BinOp::Add | BinOp::Sub) {
        return value;
    }
    let span = value.span;
    let size = Expr {
        kind: ExprKind::Int(i64::from(*bits / 8)),
        span,
    };
    Expr {
        kind: ExprKind::Binary(BinOp::Mul, Box::new(value), Box::new(size)),
        span,
    }
}

/// The `&'static str` the lexer uses for punctuation `p`.
fn static_punct(p: &str) -> &'static str {
    match p {
        "{" => "{",
        "}" => "}",
        "(" => "(",
        ")" => ")",
        "]" => "]",
        "/" => "/",
        ":" => ":",
        "," => ",",
        "*" => "*",
        _ => ";",
    }
}

/// Reads a probe as written (`tracepoint:syscalls:sys_enter_*`).
fn probe_kind(text: &str) -> std::result::Result<ProbeKind, String> {
    if text == "BEGIN" {
        return Ok(ProbeKind::Begin);
    }
    if text == "END" {
        return Ok(ProbeKind::End);
    }
    let (kind, rest) = text.split_once(':').ok_or_else(|| {
        format!("`{text}` is not a probe: expected TYPE:TARGET, e.g. tracepoint:syscalls:sys_enter_openat")
    })?;
    let parts = probe_parts(rest);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let one = |what: &str| match parts.as_slice() {
        // `kprobe:MODULE:FUNC` names the module too; the function is enough
        // (fentry keeps it: the function must be that module's).
        [name] | [_, name] if !name.is_empty() => Ok((*name).to_string()),
        _ => Err(format!("`{text}`: expected {kind}:{what}")),
    };
    match kind {
        "tracepoint" | "t" => match parts.as_slice() {
            [category, name] if !category.is_empty() && !name.is_empty() => {
                Ok(ProbeKind::Tracepoint {
                    category: (*category).into(),
                    name: (*name).into(),
                })
            }
            _ => Err(format!("`{text}`: expected tracepoint:CATEGORY:NAME")),
        },
        "rawtracepoint" | "rt" => Ok(ProbeKind::RawTracepoint { name: one("NAME")? }),
        "fentry" | "kfunc" | "f" | "fexit" | "kretfunc" | "fr" => Ok(ProbeKind::Fentry {
            function: one("FUNCTION")?,
            exit: matches!(kind, "fexit" | "kretfunc" | "fr"),
            module: (parts.len() == 2).then(|| parts[0].to_string()),
        }),
        "kprobe" | "k" | "kretprobe" | "kr" => Ok(ProbeKind::Kprobe {
            function: one("FUNCTION")?,
            exit: matches!(kind, "kretprobe" | "kr"),
        }),
        "uprobe" | "u" | "uretprobe" | "ur" => match parts.split_last() {
            Some((symbol, path)) if !path.concat().is_empty() && !symbol.is_empty() => {
                Ok(ProbeKind::Uprobe {
                    path: path.join(":"),
                    symbol: (*symbol).to_string(),
                    exit: matches!(kind, "uretprobe" | "ur"),
                })
            }
            _ => Err(format!("`{text}`: expected {kind}:PATH:SYMBOL")),
        },
        "usdt" | "U" => {
            // An empty PATH (`usdt:PROBE`, `usdt::PROVIDER:PROBE`) is every
            // file of the `-p` process, as bpftrace reads it.
            let (path, provider, name) = match parts.as_slice() {
                [name] => ("", "*", *name),
                // An empty provider is any (`usdt:PATH::PROBE`).
                [path, name] | [path, "", name] => (*path, "*", *name),
                [path, provider, name] => (*path, *provider, *name),
                _ => ("", "", ""),
            };
            if provider.is_empty() || name.is_empty() {
                return Err(format!(
                    "`{text}`: expected usdt:PATH:[PROVIDER:]PROBE (or usdt:PROBE with -p PID)"
                ));
            }
            Ok(ProbeKind::Usdt {
                path: path.into(),
                provider: provider.into(),
                name: name.into(),
                // Each site's, once expansion has read the file.
                offset: 0,
                semaphore: 0,
            })
        }
        "profile" | "p" => {
            let (unit, n) = timed("profile", &parts, text)?;
            Ok(ProbeKind::Profile { unit, n })
        }
        "software" | "s" | "hardware" | "h" => {
            let hardware = kind.starts_with('h');
            let (name, period) = match parts.as_slice() {
                [name] => (*name, None),
                [name, n] => (*name, Some(positive(n, text)?)),
                _ => return Err(format!("`{text}`: expected {kind}:EVENT:N")),
            };
            let (event, alias, default) = PerfEvent::find(hardware, name).ok_or_else(|| {
                format!(
                    "`{text}`: no {kind} event `{name}`; there are {}",
                    PerfEvent::names(hardware).join(", ")
                )
            })?;
            Ok(ProbeKind::PerfEvent {
                event,
                alias,
                period: period.unwrap_or(default),
            })
        }
        "interval" | "i" => {
            let (unit, n) = timed("interval", &parts, text)?;
            Ok(ProbeKind::Interval { unit, n })
        }
        "watchpoint" | "w" | "asyncwatchpoint" | "aw" => watchpoint(kind, &parts, text),
        "iter" | "it" => iterator(&parts, text),
        _ => Err(format!(
            "unknown probe type `{kind}`: weft knows tracepoint, rawtracepoint, fentry, fexit, kprobe, kretprobe, uprobe, uretprobe, usdt, profile, software, hardware, interval, watchpoint, asyncwatchpoint, iter, BEGIN and END"
        )),
    }
}

/// `iter:NAME`: one of the kernel's iterators bpftrace runs.
fn iterator(parts: &[&str], text: &str) -> std::result::Result<ProbeKind, String> {
    match parts {
        [name] if weft_abi::oneliner::ITERATORS.contains(name) => Ok(ProbeKind::Iter {
            name: (*name).into(),
        }),
        [name, _] => Err(format!(
            "`{text}`: weft does not pin iterators; `iter:{name}` prints what it finds"
        )),
        _ => Err(format!(
            "`{text}`: expected iter:{}",
            weft_abi::oneliner::ITERATORS.join(" or iter:")
        )),
    }
}

/// `watchpoint:ADDR:LEN:MODE`: an address (hex or decimal), 1, 2, 4 or 8
/// bytes, and `w`, `rw` (`wr`) or `x`, which x86-64's debug registers
/// watch (a read alone they do not).
fn watchpoint(kind: &str, parts: &[&str], text: &str) -> std::result::Result<ProbeKind, String> {
    let [address, len, mode] = parts else {
        return Err(format!(
            "`{text}`: expected {kind}:ADDRESS:LENGTH:MODE or {kind}:FUNCTION+argN:LENGTH:MODE"
        ));
    };
    // `FUNCTION+argN`: the address the argument holds.
    let argument = match address.rsplit_once('+') {
        Some((function, arg)) => {
            let n = (arg.strip_prefix("arg").and_then(|n| n.parse::<u8>().ok()))
                .filter(|n| usize::from(*n) < crate::registers::REGISTER_ARGS.len())
                .ok_or_else(|| {
                    format!("`{text}`: `{arg}` is not an argument in a register, arg0 to arg5")
                })?;
            if function.is_empty() {
                return Err(format!("`{text}`: expected FUNCTION+argN"));
            }
            Some((function, n))
        }
        None => None,
    };
    let address = match address.strip_prefix("0x") {
        _ if argument.is_some() => Some(0),
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => address.parse().ok(),
    }
    .ok_or_else(|| format!("`{text}`: `{address}` is not an address or FUNCTION+argN"))?;
    let len = match *len {
        "1" => 1,
        "2" => 2,
        "4" => 4,
        "8" => 8,
        _ => return Err(format!("`{text}`: a watchpoint's length is 1, 2, 4 or 8")),
    };
    let mode = match *mode {
        "w" => "w",
        "rw" | "wr" => "rw",
        "x" => "x",
        _ => {
            return Err(format!(
                "`{text}`: a watchpoint's mode is w, rw or x (the CPU does not watch reads alone)"
            ));
        }
    };
    Ok(match argument {
        Some((function, arg)) => ProbeKind::WatchArg {
            path: String::new(),
            function: function.to_owned(),
            arg,
            len,
            mode,
            sync: !kind.starts_with('a'),
        },
        None => ProbeKind::Watchpoint { address, len, mode },
    })
}

/// The unit and count of a `profile` or `interval` probe, `KIND:UNIT:N`.
fn timed(
    kind: &str,
    parts: &[&str],
    text: &str,
) -> std::result::Result<(&'static str, u64), String> {
    match parts {
        [unit, n] => {
            let (unit, _) = TIME_UNITS
                .iter()
                .find(|(name, _)| name == unit)
                .ok_or_else(|| {
                    format!(
                        "`{text}`: expected {kind}:hz:N, {kind}:s:N, {kind}:ms:N or {kind}:us:N"
                    )
                })?;
            Ok((unit, positive(n, text)?))
        }
        _ => Err(format!(
            "`{text}`: expected {kind}:UNIT:N, with UNIT hz, s, ms or us"
        )),
    }
}
fn positive(n: &str, text: &str) -> std::result::Result<u64, String> {
    match n.parse::<u64>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(format!("`{text}`: `{n}` is not a positive integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchpoints_as_bpftrace_writes_them() {
        let kind = |text: &str| probe_kind(text);
        assert_eq!(
            kind("watchpoint:0x40401c:4:w"),
            Ok(ProbeKind::Watchpoint {
                address: 0x0040_401c,
                len: 4,
                mode: "w"
            })
        );
        assert_eq!(
            kind("aw:4210716:8:wr").map(|k| k.name()),
            Ok("watchpoint:0x40401c:8:rw".into())
        );
        assert!(kind("w:0x10:3:w").unwrap_err().contains("1, 2, 4 or 8"));
        assert!(
            kind("w:0x10:4:r")
                .unwrap_err()
                .contains("mode is w, rw or x")
        );
        assert_eq!(
            kind("asyncwatchpoint:increment_*+arg1:4:w"),
            Ok(ProbeKind::WatchArg {
                path: String::new(),
                function: "increment_*".into(),
                arg: 1,
                len: 4,
                mode: "w",
                sync: false,
            })
        );
        assert!(
            kind("w:main+arg9:4:w")
                .unwrap_err()
                .contains("arg0 to arg5")
        );
        assert!(kind("w:main:4:w").unwrap_err().contains("FUNCTION+argN"));
        assert!(
            kind("w:0x10:4")
                .unwrap_err()
                .contains("ADDRESS:LENGTH:MODE")
        );
    }

    #[test]
    fn quoted_probe_parts_as_bpftrace_reads_them() {
        let p = parse(r#"usdt:"/a b/prog":test:"\"probe1\"", uprobe:"/x:y":"fn"+4 { }"#).unwrap();
        let kinds: Vec<_> = p.items[0].probes.iter().map(|p| &p.kind).collect();
        assert!(
            matches!(kinds[0], ProbeKind::Usdt { path, provider, name, .. }
            if path == "/a b/prog" && provider == "test" && name == "\"probe1\""),
            "{kinds:?}"
        );
        assert!(
            matches!(kinds[1], ProbeKind::Uprobe { path, symbol, .. }
            if path == "/x:y" && symbol == "fn+4"),
            "{kinds:?}"
        );
    }

    #[test]
    fn classic_one_liner() {
        let p = parse(r#"tracepoint:syscalls:sys_enter_openat /pid == 42/ { printf("%s %s\n", comm, str(args.filename)); }"#).unwrap();
        assert_eq!(p.items.len(), 1);
        assert_eq!(
            p.items[0].probes[0].kind,
            ProbeKind::Tracepoint {
                category: "syscalls".into(),
                name: "sys_enter_openat".into()
            }
        );
        assert!(p.items[0].predicate.is_some());
        assert!(
            matches!(&p.items[0].body[0], Stmt::Expr(Expr { kind: ExprKind::Call(name, args), .. }) if name == "printf" && args.len() == 3)
        );
    }

    #[test]
    fn predicate_ends_at_slash_and_division_needs_parentheses() {
        let p = parse("BEGIN /(nsecs / 2) > 1/ { @ = count() }").unwrap();
        let Some(Expr {
            kind: ExprKind::Binary(BinOp::Gt, left, _),
            ..
        }) = &p.items[0].predicate
        else {
            panic!("expected a comparison")
        };
        assert!(matches!(left.kind, ExprKind::Binary(BinOp::Div, _, _)));
    }

    #[test]
    fn several_probes_updates_and_if() {
        let p = parse("kprobe:a, kretprobe:b { @x[tid]++; $y += 2; if ($y > 1) { delete(@x[tid]) } else { exit() } }").unwrap();
        assert_eq!(p.items[0].probes.len(), 2);
        assert_eq!(p.items[0].body.len(), 3);
    }

    #[test]
    fn precedence() {
        let p = parse("BEGIN { $x = 1 + 2 * 3 == 7 && 1 }").unwrap();
        let Stmt::VarAssign { value, .. } = &p.items[0].body[0] else {
            panic!()
        };
        assert!(matches!(
            value.kind,
            ExprKind::Binary(BinOp::LogicalAnd, _, _)
        ));
    }

    #[test]
    fn errors_point_at_the_token() {
        let text = "tracepoint:syscalls:sys_enter_read { @x = count() @y = 1 }";
        let err = parse(text).unwrap_err();
        assert_eq!(err.message, "expected `;` or `}`, found map `@y`");
        assert_eq!(&text[err.span.start..err.span.start + err.span.len], "@y");
        let err = parse("blah:x { }").unwrap_err();
        assert!(err.message.starts_with("unknown probe type `blah`"));
        assert_eq!(err.span, Span::new(0, 6));
    }

    // Positional parameters (`params.rs`), put in while parsing.
    fn with_params(text: &str, params: &[&str]) -> Result<Program> {
        let params: Vec<String> = params.iter().map(|p| (*p).to_owned()).collect();
        parse_with(text, &params)
    }

    /// The predicate after substitution, in the parser's debug text.
    fn predicate(text: &str, params: &[&str]) -> String {
        let program = with_params(text, params).expect("substitutes");
        format!(
            "{:?}",
            program.items[0]
                .predicate
                .clone()
                .expect("a predicate")
                .kind
        )
    }

    #[test]
    fn numbers_strings_counts_and_missing_parameters() {
        let probe = "tracepoint:syscalls:sys_enter_read";
        let p = |pred: &str, params: &[&str]| predicate(&format!("{probe} /{pred}/ {{ }}"), params);
        assert_eq!(p("$1", &["0x10"]), "Int(16)");
        assert_eq!(p("$2", &["1"]), "Int(0)");
        assert_eq!(p("$#", &["a", "b"]), "Int(2)");
        // Spans differ; the values must not.
        let strip = |s: String| s.split("span").next().unwrap_or_default().to_owned();
        assert_eq!(strip(p("str($1) == 1", &[])), strip(p("\"\" == 1", &[])));
        assert!(p("str($1 + 1) == comm", &["abc"]).contains("Str(\"bc\")"));
        assert!(p("str($1) == comm", &["42"]).contains("Str(\"42\")"));
    }

    #[test]
    fn probes_name_parameters() {
        let program =
            with_params("interval:s:$1 { } uprobe:$2:main { }", &["3", "/bin/true"]).unwrap();
        let kinds: Vec<String> = program
            .items
            .iter()
            .map(|item| format!("{:?}", item.probes[0].kind))
            .collect();
        let expected = with_params("interval:s:3 { } uprobe:/bin/true:main { }", &[]).unwrap();
        let expected: Vec<String> = expected
            .items
            .iter()
            .map(|item| format!("{:?}", item.probes[0].kind))
            .collect();
        assert_eq!(kinds, expected);
        let error = with_params("interval:s:$1 { }", &[]).expect_err("no $1");
        assert!(error.message.contains("does not give"), "{}", error.message);
    }

    #[test]
    fn a_word_used_as_a_number_is_an_error_at_the_parameter() {
        let text = "BEGIN { printf(\"%d\\n\", $1); }";
        let error = with_params(text, &["abc"]).expect_err("not a number");
        assert_eq!(
            error.message,
            "$1 used numerically but given \"abc\". Try using str($1)."
        );
        assert_eq!(
            &text[error.span.start..error.span.start + error.span.len],
            "$1"
        );
        let error = with_params("BEGIN { printf(\"%d\\n\", $0); }", &[]).expect_err("no $0");
        assert!(error.message.contains("count from $1"), "{}", error.message);
        let error =
            with_params("BEGIN { printf(\"%s\\n\", str($1 + 4)); }", &["abc"]).expect_err("past");
        assert!(error.message.contains("3 bytes"), "{}", error.message);
    }
}
