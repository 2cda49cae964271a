//! Positional parameters: `$1`, `$2`, ... are the words after the program
//! on the command line, and `$#` is how many there are, as in bpftrace.
//!
//! A parameter is a number where the program uses it as one, which its
//! word must then be (C's `strtoll` with base 0: decimal, `0x` hex, `0`
//! octal, a sign); `str($N)` is its word as a string, and `str($N + K)`
//! the word from its K-th byte. A parameter the command line does not give
//! is 0, or "" in `str()`.

use crate::{
    ast::{BinOp, Expr, ExprKind, Program},
    error::{Error, Result},
};

/// Replaces every positional parameter in `program` (its `#define`s'
/// values included) by its value from `params`.
pub(crate) fn substitute(program: &mut Program, params: &[String]) -> Result<()> {
    let mut failed = None;
    let mut each = |expr: &mut Expr| {
        if failed.is_none()
            && let Err(error) = replace(expr, params)
        {
            failed = Some(error);
        }
    };
    program.rewrite(&mut each);
    failed.map_or(Ok(()), Err)
}

/// A probe's text with each `$N` and `$#` in it replaced by its word (as
/// bpftrace reads `interval:s:$1` or `uprobe:$1:main`); a parameter the
/// command line does not give is an error there.
pub(crate) fn in_probe(text: &str, params: &[String]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('#') {
            out.push_str(&params.len().to_string());
            rest = tail;
            continue;
        }
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let n: usize = after[..digits]
            .parse()
            .map_err(|_| "`$` in a probe must start a positional parameter ($1, $2, ...)")?;
        let word = n
            .checked_sub(1)
            .and_then(|i| params.get(i))
            .ok_or_else(|| format!("the probe names ${n}, which the command line does not give"))?;
        out.push_str(word);
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `expr` with its value if it is a parameter, or `str()` of one.
fn replace(expr: &mut Expr, params: &[String]) -> Result<()> {
    if let ExprKind::Call(name, args) = &expr.kind
        && name == "str"
        && let [arg] = args.as_slice()
        && let Some((n, skip)) = string_param(arg)?
    {
        let word = params.get(n - 1).map_or("", String::as_str);
        let Some(rest) = usize::try_from(skip).ok().and_then(|k| word.get(k..)) else {
            return Err(Error::new(
                arg.span,
                format!(
                    "${n} is \"{word}\", {} bytes: str() cannot start {skip} bytes into it",
                    word.len()
                ),
            ));
        };
        expr.kind = ExprKind::Str(rest.to_owned());
        return Ok(());
    }
    let ExprKind::Var(name) = &expr.kind else {
        return Ok(());
    };
    if name == "#" {
        expr.kind = ExprKind::Int(i64::try_from(params.len()).unwrap_or(i64::MAX));
        return Ok(());
    }
    let Some(n) = index(name, expr)? else {
        return Ok(());
    };
    let value = match params.get(n - 1) {
        None => 0,
        Some(word) => c_integer(word).ok_or_else(|| {
            Error::new(
                expr.span,
                format!("${n} used numerically but given \"{word}\". Try using str(${n})."),
            )
        })?,
    };
    expr.kind = ExprKind::Int(value);
    Ok(())
}

/// The parameter a `str()` argument names, `$N` or `$N + K`, and K.
fn string_param(arg: &Expr) -> Result<Option<(usize, i64)>> {
    match &arg.kind {
        ExprKind::Var(name) => Ok(index(name, arg)?.map(|n| (n, 0))),
        ExprKind::Binary(BinOp::Add, param, offset) => match (&param.kind, &offset.kind) {
            (ExprKind::Var(name), ExprKind::Int(k)) => Ok(index(name, param)?.map(|n| (n, *k))),
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

/// N of a variable named `$N` (None for other variables).
fn index(name: &str, var: &Expr) -> Result<Option<usize>> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match name.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(Error::new(
            var.span,
            format!("param ${name} is out of range: parameters count from $1"),
        )),
    }
}

/// `word` as C's `strtoll(word, &end, 0)` reads it when it reads it whole.
pub(crate) fn c_integer(word: &str) -> Option<i64> {
    let (negative, digits) = match word.as_bytes().first() {
        Some(b'-') => (true, &word[1..]),
        Some(b'+') => (false, &word[1..]),
        _ => (false, word),
    };
    let (radix, digits) = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, hex)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoll_reads_the_words_bpftrace_reads() {
        for (word, value) in [
            ("42", Some(42)),
            ("-3", Some(-3)),
            ("0x10", Some(16)),
            ("010", Some(8)),
            ("0", Some(0)),
            ("1e3", None),
            ("12abc", None),
            ("0x1g", None),
            ("", None),
            ("-", None),
        ] {
            assert_eq!(c_integer(word), value, "{word}");
        }
    }
}
