//! Tokens of the query language, each with the byte span it came from so
//! that errors can point at it.

use crate::error::{Error, Span};

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    /// A word: source, field, keyword or function name (`p99.99` included).
    Word(String),
    /// An integer or decimal number without a unit.
    Number(f64),
    /// A number with a time unit, in ns.
    Duration(i64),
    /// A quoted string.
    Str(String),
    /// Punctuation or an operator: `| , ( ) [ ] = != < <= > >= ~ - +`.
    Punct(&'static str),
}

impl Token {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Self::Word(w) => format!("`{w}`"),
            Self::Number(n) => format!("number {n}"),
            Self::Duration(_) => "a duration".into(),
            Self::Str(s) => format!("string \"{s}\""),
            Self::Punct(p) => format!("`{p}`"),
        }
    }
}

const PUNCT: [&str; 15] = [
    "!=", "<=", ">=", "|", ",", "(", ")", "[", "]", "=", "<", ">", "~", "-", "+",
];

/// Time units a number may carry, with their length in ns.
const UNITS: [(&str, i64); 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Splits `text` into tokens.
pub fn tokenize(text: &str) -> Result<Vec<(Token, Span)>, Error> {
    let mut tokens = Vec::new();
    let mut pos = 0;
    while let Some(c) = text[pos..].chars().next() {
        if c.is_whitespace() {
            pos += c.len_utf8();
            continue;
        }
        let (token, len) = if c.is_ascii_digit() {
            number(&text[pos..]).map_err(|(message, len)| Error::at(pos, len, message))?
        } else if c.is_alphabetic() || c == '_' {
            word(&text[pos..])
        } else if c == '"' || c == '\'' {
            string(&text[pos..]).map_err(|(message, len)| Error::at(pos, len, message))?
        } else if let Some(p) = PUNCT.iter().find(|p| text[pos..].starts_with(**p)) {
            (Token::Punct(p), p.len())
        } else {
            return Err(Error::at(
                pos,
                c.len_utf8(),
                format!("unexpected character `{c}`"),
            ));
        };
        tokens.push((token, Span::new(pos, len)));
        pos += len;
    }
    Ok(tokens)
}

fn word(text: &str) -> (Token, usize) {
    let mut len = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    // `p99.99`: a percentile name keeps its decimal part.
    let is_percentile = text.starts_with('p') && text[1..len].bytes().all(|b| b.is_ascii_digit());
    if is_percentile && len > 1 && text[len..].starts_with('.') {
        let digits = text[len + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len() - len - 1);
        if digits > 0 {
            len += 1 + digits;
        }
    }
    (Token::Word(text[..len].to_owned()), len)
}

fn number(text: &str) -> Result<(Token, usize), (String, usize)> {
    let mut len = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let digits = &text[..len];
    let value: f64 = digits
        .parse()
        .map_err(|_| (format!("`{digits}` is not a number"), len))?;
    let unit_len = text[len..]
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(text.len() - len);
    if unit_len == 0 {
        return Ok((Token::Number(value), len));
    }
    let unit = &text[len..len + unit_len];
    len += unit_len;
    let (_, scale) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(|| {
        (
            format!("unknown unit `{unit}` (expected ns, us, ms, s, m or h)"),
            len,
        )
    })?;
    let ns = value * *scale as f64;
    if !(0.0..9.2e18).contains(&ns) {
        return Err((format!("`{}` is out of range", &text[..len]), len));
    }
    Ok((Token::Duration(ns.round() as i64), len))
}

fn string(text: &str) -> Result<(Token, usize), (String, usize)> {
    let quote = text.chars().next().unwrap_or('"');
    let mut value = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, e)) => value.push(e),
                None => break,
            },
            c if c == quote => return Ok((Token::Str(value), i + 1)),
            c => value.push(c),
        }
    }
    Err(("string is not closed".into(), text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Token> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    #[test]
    fn tokenize_words_numbers_durations_strings() {
        assert_eq!(
            kinds(r#"name = "sendto" | p99.99(dur) last 1.5s"#),
            vec![
                Token::Word("name".into()),
                Token::Punct("="),
                Token::Str("sendto".into()),
                Token::Punct("|"),
                Token::Word("p99.99".into()),
                Token::Punct("("),
                Token::Word("dur".into()),
                Token::Punct(")"),
                Token::Word("last".into()),
                Token::Duration(1_500_000_000),
            ]
        );
    }

    #[test]
    fn tokenize_operators_longest_first() {
        assert_eq!(
            kinds("a<=-3 b!=4 c>=5 d~'x\\'y'"),
            vec![
                Token::Word("a".into()),
                Token::Punct("<="),
                Token::Punct("-"),
                Token::Number(3.0),
                Token::Word("b".into()),
                Token::Punct("!="),
                Token::Number(4.0),
                Token::Word("c".into()),
                Token::Punct(">="),
                Token::Number(5.0),
                Token::Word("d".into()),
                Token::Punct("~"),
                Token::Str("x'y".into()),
            ]
        );
    }

    #[test]
    fn tokenize_spans_point_into_text() {
        let tokens = tokenize("count by  comm").unwrap();
        let spans: Vec<(usize, usize)> = tokens.iter().map(|(_, s)| (s.start, s.len)).collect();
        assert_eq!(spans, vec![(0, 5), (6, 2), (10, 4)]);
    }

    #[test]
    fn tokenize_rejects_bad_units_and_characters() {
        assert_eq!(
            tokenize("dur > 5xs").unwrap_err().to_string(),
            "at 6: unknown unit `xs` (expected ns, us, ms, s, m or h)"
        );
        assert_eq!(
            tokenize("a # b").unwrap_err().to_string(),
            "at 2: unexpected character `#`"
        );
        assert_eq!(
            tokenize("a = \"open").unwrap_err().to_string(),
            "at 4: string is not closed"
        );
    }
}
