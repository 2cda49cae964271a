//! Tokens of the one-liner language. The lexer runs on demand because a
//! probe (`uprobe:/bin/bash:readline`) reads differently from an action
//! (`a / b`): the parser asks for a probe where an item starts.

use crate::error::{Error, Result, Span};

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// An integer literal.
    Int(i64),
    /// A quoted string, escapes resolved.
    Str(String),
    /// A word: builtin, function or keyword.
    Ident(String),
    /// `@name` (`@` alone gives the empty name).
    Map(String),
    /// `$name`.
    Var(String),
    /// Punctuation or an operator.
    Punct(&'static str),
    /// The end of the text.
    End,
}

impl Token {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Self::Int(n) => format!("number {n}"),
            Self::Str(s) => format!("string \"{s}\""),
            Self::Ident(w) => format!("`{w}`"),
            Self::Map(m) => format!("map `@{m}`"),
            Self::Var(v) => format!("variable `${v}`"),
            Self::Punct(p) => format!("`{p}`"),
            Self::End => "the end of the program".into(),
        }
    }
}

/// Longest first, so `<<=` wins over `<<` and `<`.
const PUNCT: [&str; 45] = [
    "<<=", ">>=", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "->", "++", "--", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "{", "}", "(", ")", "[", "]", ";", ",", ".", "=", "<", ">",
    "+", "-", "*", "/", "%", "&", "|", "^", "!", "~", "?", ":",
];

/// A cursor over the program text.
#[derive(Clone)]
pub struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    /// The byte offset of the cursor.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The next token, without consuming it.
    pub fn peek(&self) -> Result<(Token, Span)> {
        self.clone().token()
    }

    /// Skips whitespace and `//` and `/* */` comments.
    fn skip_blank(&mut self) -> Result<()> {
        loop {
            let rest = &self.text[self.pos..];
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if trimmed.starts_with("/*") {
                let end = trimmed.find("*/").ok_or_else(|| {
                    Error::new(Span::new(self.pos, 2), "comment is never closed with `*/`")
                })?;
                self.pos += end + 2;
            } else {
                return Ok(());
            }
        }
    }

    /// Whether only blanks remain.
    pub fn at_end(&mut self) -> Result<bool> {
        self.skip_blank()?;
        Ok(self.pos == self.text.len())
    }

    /// A probe: everything up to blank space, `,` or `{` outside quotes
    /// (`usdt:PATH:"a probe"`).
    pub fn probe(&mut self) -> Result<(String, Span)> {
        self.skip_blank()?;
        let rest = &self.text[self.pos..];
        let mut quoted = false;
        let mut escaped = false;
        let len = rest
            .find(|c: char| {
                let end = !quoted && (c.is_whitespace() || c == ',' || c == '{');
                match c {
                    _ if escaped => escaped = false,
                    '\\' if quoted => escaped = true,
                    '"' => quoted = !quoted,
                    _ => {}
                }
                end
            })
            .unwrap_or(rest.len());
        let span = Span::new(self.pos, len);
        if len == 0 {
            let found = self.peek()?.0.describe();
            return Err(Error::new(span, format!("expected a probe, found {found}")));
        }
        self.pos += len;
        Ok((rest[..len].to_string(), span))
    }

    /// The next token.
    pub fn token(&mut self) -> Result<(Token, Span)> {
        self.skip_blank()?;
        let start = self.pos;
        let rest = &self.text[start..];
        let Some(c) = rest.chars().next() else {
            return Ok((Token::End, Span::new(start, 0)));
        };
        let (token, len) = if c.is_ascii_digit() {
            number(rest).map_err(|message| Error::new(Span::new(start, word_len(rest)), message))?
        } else if c == '"' {
            string(rest).map_err(|(message, len)| Error::new(Span::new(start, len), message))?
        } else if rest.starts_with("$#") {
            (Token::Var("#".into()), 2)
        } else if c == '@' || c == '$' {
            let len = 1 + word_len(&rest[1..]);
            let name = rest[1..len].to_string();
            if c == '@' {
                (Token::Map(name), len)
            } else if name.is_empty() {
                return Err(Error::new(
                    Span::new(start, 1),
                    "`$` must start a variable name",
                ));
            } else {
                (Token::Var(name), len)
            }
        } else if c.is_alphabetic() || c == '_' {
            let len = word_len(rest);
            (Token::Ident(rest[..len].to_string()), len)
        } else if let Some(p) = PUNCT.iter().find(|p| rest.starts_with(**p)) {
            (Token::Punct(p), p.len())
        } else {
            return Err(Error::new(
                Span::new(start, c.len_utf8()),
                format!("unexpected character `{c}`"),
            ));
        };
        self.pos += len;
        Ok((token, Span::new(start, len)))
    }
}

fn word_len(text: &str) -> usize {
    text.find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len())
}

/// A decimal or `0x` hexadecimal integer, or one in bpftrace's
/// scientific notation (`1e6`: an integer times a power of ten).
fn number(text: &str) -> std::result::Result<(Token, usize), String> {
    let len = word_len(text);
    let word = text[..len].replace('_', "");
    let not_integer = || format!("`{}` is not an integer", &text[..len]);
    let value = if let Some(hex) = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).map(|v| v as i64).ok()
    } else if let Some((mantissa, exponent)) = word.split_once(['e', 'E'])
        && !mantissa.is_empty()
    {
        let (mantissa, exponent) = (mantissa.parse::<i64>(), exponent.parse::<u32>());
        mantissa
            .ok()
            .zip(exponent.ok())
            .and_then(|(m, e)| 10i64.checked_pow(e).and_then(|p| m.checked_mul(p)))
    } else {
        // C's suffixes (`10u`, `1ull`) change nothing here, where every
        // integer is 64 bits; a leading 0 is octal, as C reads it.
        let digits = word.trim_end_matches(['u', 'U', 'l', 'L']);
        let suffix = &word[digits.len()..].to_ascii_lowercase();
        let suffixed = ["", "u", "l", "ul", "ll", "ull"].contains(&suffix.as_str());
        let octal = digits.len() > 1 && digits.starts_with('0');
        let radix = if octal { 8 } else { 10 };
        suffixed
            .then(|| u64::from_str_radix(digits, radix).ok().map(|v| v as i64))
            .flatten()
    };
    value.map(|v| (Token::Int(v), len)).ok_or_else(not_integer)
}

/// A double-quoted string with C escapes.
fn string(text: &str) -> std::result::Result<(Token, usize), (String, usize)> {
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((Token::Str(out), i + 1)),
            '\\' => {
                let Some((j, e)) = chars.next() else { break };
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' => '\\',
                    '"' => '"',
                    // `\101`, `\x41`: a byte by its number, as bpftrace reads it.
                    '0'..='7' | 'x' | 'X' => {
                        let (radix, most, start) = match e {
                            'x' | 'X' => (16, 2, j + 1),
                            _ => (8, 3, j),
                        };
                        let digits = text[start..]
                            .chars()
                            .take(most)
                            .take_while(|c| c.is_digit(radix))
                            .count();
                        let value = u32::from_str_radix(&text[start..start + digits], radix)
                            .ok()
                            .and_then(|v| u8::try_from(v).ok())
                            .ok_or_else(|| {
                                (
                                    format!(
                                        "escape `{}` is not a byte",
                                        &text[j - 1..start + digits]
                                    ),
                                    start + digits,
                                )
                            })?;
                        for _ in start + 1..start + digits {
                            chars.next();
                        }
                        if radix == 16 {
                            chars.next();
                        }
                        char::from(value)
                    }
                    _ => return Err((format!("unknown escape `\\{e}`"), j + e.len_utf8())),
                });
            }
            '\n' => break,
            c => out.push(c),
        }
    }
    Err(("string is never closed with `\"`".into(), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<Token> {
        let mut lexer = Lexer::new(text);
        let mut out = Vec::new();
        loop {
            let (token, _) = lexer.token().unwrap();
            if token == Token::End {
                return out;
            }
            out.push(token);
        }
    }

    #[test]
    fn scientific_integers_are_powers_of_ten() {
        assert_eq!(
            tokens("1e6 5E2 1_000"),
            [Token::Int(1_000_000), Token::Int(500), Token::Int(1000)]
        );
        assert!(Lexer::new("1e99").token().is_err());
    }

    #[test]
    fn integers_and_escapes_as_c_writes_them() {
        assert_eq!(
            tokens(r#"010 0 10u 7ULL 0x1f "\101\x42\0\7c""#),
            vec![
                Token::Int(8),
                Token::Int(0),
                Token::Int(10),
                Token::Int(7),
                Token::Int(31),
                Token::Str("AB\0\u{7}c".into()),
            ]
        );
        for bad in ["09", "10lu", r#""\400""#, r#""\xg""#] {
            assert!(Lexer::new(bad).token().is_err(), "{bad}");
        }
    }

    #[test]
    fn operators_maps_and_strings() {
        assert_eq!(
            tokens(r#"@x[comm] <<= 0x10; $y != "a\n" // c"#),
            vec![
                Token::Map("x".into()),
                Token::Punct("["),
                Token::Ident("comm".into()),
                Token::Punct("]"),
                Token::Punct("<<="),
                Token::Int(16),
                Token::Punct(";"),
                Token::Var("y".into()),
                Token::Punct("!="),
                Token::Str("a\n".into()),
            ]
        );
    }

    #[test]
    fn probes_keep_slashes_and_globs() {
        let mut lexer = Lexer::new(" uprobe:/bin/bash:readline,tracepoint:syscalls:sys_enter_*{");
        assert_eq!(lexer.probe().unwrap().0, "uprobe:/bin/bash:readline");
        assert_eq!(lexer.token().unwrap().0, Token::Punct(","));
        assert_eq!(lexer.probe().unwrap().0, "tracepoint:syscalls:sys_enter_*");
    }

    #[test]
    fn unclosed_string_points_at_its_quote() {
        let err = Lexer::new(r#"  "abc"#).token().unwrap_err();
        assert_eq!(err.span, Span::new(2, 1));
    }
}
