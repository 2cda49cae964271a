//! C type definitions in a program, as bpftrace 0.17 takes them before its
//! probes: `struct NAME { ... };`, `union NAME { ... }`, `enum NAME { ... };`
//! (the `;` optional), members in C's declaration syntax. Types are laid
//! out against the kernel's in `types.rs`.

use super::Parser;
use crate::{
    ast::{Base, Definitions, Enumerator, MemberDef, RecordDef, TypeRef},
    error::{Error, Result, Span},
    lex::Token,
};

/// Words that qualify a type without changing its layout.
const QUALIFIERS: [&str; 4] = ["const", "volatile", "restrict", "__restrict"];

/// Words that make up C's arithmetic types (`unsigned long long int`).
const ARITHMETIC: [&str; 9] = [
    "signed", "unsigned", "char", "short", "int", "long", "_Bool", "float", "double",
];

impl Parser<'_> {
    /// Whether a definition starts here: `struct`, `union` or `enum`,
    /// which no probe is.
    pub(super) fn at_definition(&self) -> Result<bool> {
        Ok(matches!(self.peek()?.0,
            Token::Ident(word) if matches!(word.as_str(), "struct" | "union" | "enum" | "typedef")))
    }

    /// One top-level definition, added to `definitions`.
    pub(super) fn definition(&mut self, definitions: &mut Definitions) -> Result<()> {
        let (first, span) = self.peek()?;
        if first == Token::Ident("typedef".into()) {
            return Err(Error::new(
                span,
                "a program cannot define a typedef (nor can bpftrace's): name the type itself, \
                 as in `struct NAME`",
            ));
        }
        let base = self.specifier(definitions)?;
        if matches!(base, Base::Record(_)) && !self.eat(";")? {
            // `struct NAME` alone is a declaration only before `;`.
            let (token, at) = self.peek()?;
            return Err(Error::new(
                at,
                format!(
                    "expected `{{` or `;` after the struct's name, found {}",
                    token.describe()
                ),
            ));
        }
        if let Base::Record(name) = base {
            definitions.records.push(RecordDef {
                union: name.starts_with("union "),
                name: Some(name),
                members: None,
                size: None,
                span,
            });
            return Ok(());
        }
        if let (Token::Ident(word), at) = self.peek()?
            && word == "__attribute__"
        {
            return Err(Error::new(
                at,
                "attributes are not read (nor are they by bpftrace): a struct is laid out as C lays it out",
            ));
        }
        self.eat(";")?;
        Ok(())
    }

    /// A declaration's type before its declarators: qualifiers, then an
    /// arithmetic type, a struct, union or enum (perhaps defined here), or
    /// a type name.
    fn specifier(&mut self, definitions: &mut Definitions) -> Result<Base> {
        self.qualifiers()?;
        let (token, span) = self.next()?;
        let Token::Ident(word) = token else {
            return Err(Error::new(
                span,
                format!("expected a type, found {}", token.describe()),
            ));
        };
        let base = match word.as_str() {
            "struct" | "union" => self.record(&word, span, definitions)?,
            "enum" => self.enumeration(definitions)?,
            "void" => Base::Void,
            w if ARITHMETIC.contains(&w) => self.arithmetic(w, span)?,
            _ => Base::Named(word),
        };
        self.qualifiers()?;
        Ok(base)
    }

    fn qualifiers(&mut self) -> Result<()> {
        while let (Token::Ident(word), _) = self.peek()?
            && QUALIFIERS.contains(&word.as_str())
        {
            self.next()?;
        }
        Ok(())
    }

    /// After `struct` or `union`: its name and, if `{` follows, its members.
    fn record(&mut self, keyword: &str, span: Span, definitions: &mut Definitions) -> Result<Base> {
        let name = match self.peek()? {
            (Token::Ident(name), _) => {
                self.next()?;
                Some(format!("{keyword} {name}"))
            }
            _ => None,
        };
        if !self.eat("{")? {
            if let Some(name) = name {
                return Ok(Base::Record(name));
            }
            let (token, at) = self.peek()?;
            return Err(Error::new(
                at,
                format!(
                    "expected the {keyword}'s name or `{{`, found {}",
                    token.describe()
                ),
            ));
        }
        let mut members = Vec::new();
        while !self.eat("}")? {
            self.members(definitions, &mut members)?;
        }
        let index = definitions.records.len();
        definitions.records.push(RecordDef {
            name,
            union: keyword == "union",
            members: Some(members),
            size: None,
            span: span.to(Span::new(self.lexer.pos() - 1, 1)),
        });
        Ok(Base::Inline(index))
    }

    /// One member declaration: a type, then its declarators separated by
    /// `,`, then `;`. A struct or union without declarator is an anonymous
    /// member; an enum without one only names its enumerators.
    fn members(
        &mut self,
        definitions: &mut Definitions,
        members: &mut Vec<MemberDef>,
    ) -> Result<()> {
        let (_, start) = self.peek()?;
        let base = self.specifier(definitions)?;
        if self.eat(";")? {
            if let Base::Inline(index) = base
                && definitions.records[index].name.is_none()
            {
                members.push(MemberDef {
                    name: None,
                    ty: plain(base),
                    bits: None,
                    at: None,
                    span: start,
                });
            }
            return Ok(());
        }
        loop {
            members.push(self.declarator(base.clone(), start)?);
            // The last member's `;` may be left out, as clang lets
            // bpftrace's (with a warning): `struct x { long a }`.
            if self.eat(";")? || self.peek()?.0 == Token::Punct("}") {
                return Ok(());
            }
            self.expect(",")?;
        }
    }

    /// `* * NAME [N] [M]` or `NAME : BITS`, or `: BITS` unnamed.
    fn declarator(&mut self, base: Base, start: Span) -> Result<MemberDef> {
        let mut ty = plain(base);
        while self.eat("*")? {
            ty.pointers += 1;
            self.qualifiers()?;
        }
        let (token, span) = self.peek()?;
        let name = match token {
            Token::Ident(name) => {
                self.next()?;
                Some(name)
            }
            Token::Punct(":") => None,
            _ => {
                return Err(Error::new(
                    span,
                    format!("expected a member's name, found {}", token.describe()),
                ));
            }
        };
        while self.eat("[")? {
            ty.dims.push(self.count("an array's length")?);
            self.expect("]")?;
        }
        let bits = if self.eat(":")? {
            Some(self.count("a bit-field's width")?)
        } else {
            None
        };
        Ok(MemberDef {
            name,
            ty,
            bits,
            at: None,
            span: start.to(span),
        })
    }

    /// A non-negative integer literal.
    fn count(&mut self, what: &str) -> Result<u32> {
        let (token, span) = self.next()?;
        match token {
            Token::Int(n) => u32::try_from(n)
                .map_err(|_| Error::new(span, format!("{what} must be from 0 to 2^32 - 1"))),
            _ => Err(Error::new(
                span,
                format!("expected {what}, a number, found {}", token.describe()),
            )),
        }
    }

    /// After `enum`: its name, if any, and, if `{` follows, its
    /// enumerators, each `NAME` or `NAME = VALUE`, separated by `,`.
    fn enumeration(&mut self, definitions: &mut Definitions) -> Result<Base> {
        if let (Token::Ident(_), _) = self.peek()? {
            self.next()?;
        }
        if !self.eat("{")? {
            return Ok(Base::Enum);
        }
        let mut enumerators = Vec::new();
        while !self.eat("}")? {
            let (token, span) = self.next()?;
            let Token::Ident(name) = token else {
                return Err(Error::new(
                    span,
                    format!("expected an enumerator's name, found {}", token.describe()),
                ));
            };
            let value = if self.eat("=")? {
                Some(self.expr()?)
            } else {
                None
            };
            enumerators.push(Enumerator { name, value, span });
            if !self.eat(",")? {
                self.expect("}")?;
                break;
            }
        }
        definitions.enums.push(enumerators);
        Ok(Base::Enum)
    }

    /// `unsigned`, `long`, `long long int`, ...: the words of one
    /// arithmetic type, the first one already read.
    fn arithmetic(&mut self, first: &str, span: Span) -> Result<Base> {
        let mut words = vec![first.to_owned()];
        let mut end = span;
        while let (Token::Ident(word), at) = self.peek()?
            && ARITHMETIC.contains(&word.as_str())
        {
            self.next()?;
            words.push(word);
            end = at;
        }
        arithmetic_type(&words).ok_or_else(|| {
            Error::new(
                span.to(end),
                format!("`{}` is not a C arithmetic type", words.join(" ")),
            )
        })
    }
}

/// `base` with no pointer or array.
fn plain(base: Base) -> TypeRef {
    TypeRef {
        base,
        pointers: 0,
        dims: Vec::new(),
    }
}

/// The type C's arithmetic words name, on x86-64 (LP64), in any order.
fn arithmetic_type(words: &[String]) -> Option<Base> {
    let count = |w: &str| words.iter().filter(|x| *x == w).count();
    let (signed, unsigned) = (count("signed"), count("unsigned"));
    let (char, short, int, long) = (count("char"), count("short"), count("int"), count("long"));
    let (boolean, float, double) = (count("_Bool"), count("float"), count("double"));
    if signed + unsigned > 1 || int > 1 || char + short + boolean + float + double > 1 {
        return None;
    }
    let sign = signed + unsigned;
    let base = match (char, short, long, boolean, float, double) {
        (1, 0, 0, 0, 0, 0) if int == 0 => Base::Int {
            size: 1,
            signed: unsigned == 0,
        },
        (0, 1, 0, 0, 0, 0) => Base::Int {
            size: 2,
            signed: unsigned == 0,
        },
        (0, 0, 0, 0, 0, 0) => Base::Int {
            size: 4,
            signed: unsigned == 0,
        },
        (0, 0, 1 | 2, 0, 0, 0) => Base::Int {
            size: 8,
            signed: unsigned == 0,
        },
        (0, 0, 0, 1, 0, 0) if sign + int == 0 => Base::Int {
            size: 1,
            signed: false,
        },
        (0, 0, 0, 0, 1, 0) if sign + int == 0 => Base::Float(4),
        (0, 0, 0 | 1, 0, 0, 1) if sign + int == 0 => Base::Float(if long == 1 { 16 } else { 8 }),
        _ => return None,
    };
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn words(text: &str) -> Option<Base> {
        let words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        arithmetic_type(&words)
    }

    #[test]
    fn arithmetic_types_are_lp64() {
        let int = |size, signed| Some(Base::Int { size, signed });
        assert_eq!(words("char"), int(1, true));
        assert_eq!(words("unsigned char"), int(1, false));
        assert_eq!(words("short int"), int(2, true));
        assert_eq!(words("unsigned"), int(4, false));
        assert_eq!(words("long unsigned int"), int(8, false));
        assert_eq!(words("long long"), int(8, true));
        assert_eq!(words("_Bool"), int(1, false));
        assert_eq!(words("double"), Some(Base::Float(8)));
        assert_eq!(words("long double"), Some(Base::Float(16)));
        assert_eq!(words("signed unsigned"), None);
        assert_eq!(words("short char"), None);
        assert_eq!(words("unsigned float"), None);
    }

    #[test]
    fn definitions_before_probes() {
        let program = parse(
            "struct ts { long sec; long nsec; };\n\
             union u { int x; char y[3]; }\n\
             enum color { RED, GREEN = 5, BLUE };\n\
             struct fwd;\n\
             struct w { unsigned int a : 3, : 0; struct ts *p, t; union { int i; long l; }; \
             enum { X1 } e; char name[2][8]; };\n\
             BEGIN { exit(); }",
        )
        .expect("parses");
        let defs = &program.definitions;
        let names: Vec<_> = defs.records.iter().map(|r| r.name.as_deref()).collect();
        assert_eq!(
            names,
            [
                Some("struct ts"),
                Some("union u"),
                Some("struct fwd"),
                None,
                Some("struct w")
            ]
        );
        assert!(defs.records[2].members.is_none());
        let enums: Vec<Vec<_>> = defs
            .enums
            .iter()
            .map(|e| e.iter().map(|e| e.name.as_str()).collect())
            .collect();
        assert_eq!(enums, [vec!["RED", "GREEN", "BLUE"], vec!["X1"]]);
        let w = defs.records[4].members.as_ref().expect("members");
        let shape: Vec<_> = w
            .iter()
            .map(|m| (m.name.as_deref(), m.ty.pointers, m.ty.dims.clone(), m.bits))
            .collect();
        assert_eq!(
            shape,
            [
                (Some("a"), 0, vec![], Some(3)),
                (None, 0, vec![], Some(0)),
                (Some("p"), 1, vec![], None),
                (Some("t"), 0, vec![], None),
                (None, 0, vec![], None),
                (Some("e"), 0, vec![], None),
                (Some("name"), 0, vec![2, 8], None),
            ]
        );
        assert_eq!(w[4].ty.base, Base::Inline(3));
        assert_eq!(w[3].ty.base, Base::Record("struct ts".into()));
    }

    #[test]
    fn a_bad_definition_says_where() {
        for (text, says) in [
            ("struct s { int a b; }; BEGIN {}", "expected `,`"),
            ("struct s { int *; }; BEGIN {}", "expected a member's name"),
            (
                "struct s { signed unsigned a; }; BEGIN {}",
                "not a C arithmetic type",
            ),
            ("struct s { char c[-1]; }; BEGIN {}", "an array's length"),
            ("struct s BEGIN {}", "after the struct's name"),
            ("enum { 3 }; BEGIN {}", "enumerator's name"),
            ("typedef int x; BEGIN {}", "cannot define a typedef"),
            (
                "struct s { int a; } __attribute__((packed)); BEGIN {}",
                "attributes are not read",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.message.contains(says), "{text}: {error:?}");
        }
    }
}
