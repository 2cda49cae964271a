//! Resolves the names in a condition against a source's columns: fields
//! become column numbers, text becomes the numbers it names, and each
//! comparison becomes an integer test the scan can evaluate fast.

use crate::{
    ast::{Cond, Literal, Name, Op, Value},
    catalog::{Column, Kind, SourceColumns},
    error::{Error, Result, Span},
};

/// A condition ready to evaluate on records.
#[derive(Clone, Debug, PartialEq)]
pub enum Pred {
    /// All hold.
    And(Vec<Pred>),
    /// One holds.
    Or(Vec<Pred>),
    /// It does not hold.
    Not(Box<Pred>),
    /// Column value compared with a number.
    Compare {
        /// Column number in the source.
        column: usize,
        /// One of `= != < <= > >=`.
        op: Op,
        /// The number.
        value: i64,
    },
    /// Column value is one of these (sorted).
    In {
        /// Column number in the source.
        column: usize,
        /// The values.
        values: Vec<i64>,
    },
    /// Column value compared with its own percentile over the window; the
    /// engine replaces it with a [`Pred::Compare`] once it knows the value.
    Threshold {
        /// Column number in the source.
        column: usize,
        /// One of `= != < <= > >=`.
        op: Op,
        /// The quantile, 0 to 1.
        q: f64,
        /// Where it was written.
        span: Span,
    },
    /// The text a bytes column shows (printable ASCII as is, the rest
    /// escaped) matches a glob, or equals a text.
    Text {
        /// Column number in the source.
        column: usize,
        /// The glob or the text.
        pattern: String,
        /// Whether `pattern` is a glob.
        glob: bool,
    },
}

impl Pred {
    /// Whether it holds for a record whose column values `value` gives
    /// (a [`Pred::Text`] never does: see [`Pred::matches`]).
    pub fn eval(&self, value: &impl Fn(usize) -> Option<i64>) -> bool {
        self.eval_with(value, &|_| None)
    }

    /// Whether it holds for the record `payload` at `time` of a source
    /// with `columns`.
    pub fn matches(&self, columns: &[Column], time: u64, payload: &[u8]) -> bool {
        self.eval_with(&|c| columns[c].value(time, payload), &|c| {
            columns[c].bytes(payload)
        })
    }

    fn eval_with<'p>(
        &self,
        value: &impl Fn(usize) -> Option<i64>,
        bytes: &impl Fn(usize) -> Option<&'p [u8]>,
    ) -> bool {
        match self {
            Self::And(all) => all.iter().all(|p| p.eval_with(value, bytes)),
            Self::Or(any) => any.iter().any(|p| p.eval_with(value, bytes)),
            Self::Not(p) => !p.eval_with(value, bytes),
            Self::Text {
                column,
                pattern,
                glob: is_glob,
            } => bytes(*column).is_some_and(|b| {
                let text = b.escape_ascii().to_string();
                if *is_glob {
                    glob(pattern, &text)
                } else {
                    *pattern == text
                }
            }),
            Self::Compare {
                column,
                op,
                value: v,
            } => value(*column).is_some_and(|x| compare(x, *op, *v)),
            Self::In { column, values } => {
                value(*column).is_some_and(|x| values.binary_search(&x).is_ok())
            }
            // Unresolved thresholds never reach a scan.
            Self::Threshold { .. } => false,
        }
    }

    /// The conjuncts at the top level.
    pub fn conjuncts(self) -> Vec<Pred> {
        match self {
            Self::And(all) => all.into_iter().flat_map(Pred::conjuncts).collect(),
            other => vec![other],
        }
    }

    /// The value range of `column` this predicate alone allows, if it
    /// narrows it at all: what an indexed scan can look up.
    pub fn range_of(&self, column: usize) -> Option<(i64, i64)> {
        match self {
            Self::Compare {
                column: c,
                op,
                value,
            } if *c == column => match op {
                Op::Eq => Some((*value, *value)),
                Op::Lt => Some((i64::MIN, value.checked_sub(1)?)),
                Op::Le => Some((i64::MIN, *value)),
                Op::Gt => Some((value.checked_add(1)?, i64::MAX)),
                Op::Ge => Some((*value, i64::MAX)),
                Op::Ne | Op::Glob => None,
            },
            Self::In { column: c, values } if *c == column => {
                Some((*values.first()?, *values.last()?))
            }
            _ => None,
        }
    }

    /// The value range of `column` this predicate holds for, when it
    /// holds for exactly that range (not for `in (1, 5)`, whose range
    /// `1..=5` holds more): what summaries of value bins can count.
    pub fn exact_range_of(&self, column: usize) -> Option<(i64, i64)> {
        let (lo, hi) = self.range_of(column)?;
        match self {
            Self::In { values, .. }
                if i128::from(hi) - i128::from(lo) + 1 != values.len() as i128 =>
            {
                None
            }
            _ => Some((lo, hi)),
        }
    }

    /// Column numbers the predicate reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        match self {
            Self::And(all) | Self::Or(all) => all.iter().for_each(|p| p.columns(out)),
            Self::Not(p) => p.columns(out),
            Self::Compare { column, .. }
            | Self::In { column, .. }
            | Self::Threshold { column, .. }
            | Self::Text { column, .. } => {
                out.push(*column);
            }
        }
    }
}

fn compare(x: i64, op: Op, v: i64) -> bool {
    match op {
        Op::Eq => x == v,
        Op::Ne => x != v,
        Op::Lt => x < v,
        Op::Le => x <= v,
        Op::Gt => x > v,
        Op::Ge => x >= v,
        Op::Glob => false,
    }
}

/// The column called `name` in `source` with a value to compare, group or
/// aggregate, or an error listing the columns.
pub fn column<'s>(source: &'s SourceColumns, name: &Name) -> Result<(usize, &'s Column)> {
    let (at, column) = listed_column(source, name)?;
    if matches!(column.kind, Kind::Bytes) {
        return Err(Error::spanned(
            name.span,
            format!(
                "`{}` holds bytes: it can be listed with `fields` and matched with `~`, `=` or `!=`, not grouped or aggregated",
                name.text
            ),
        ));
    }
    Ok((at, column))
}

/// The column called `name` in `source`, to list with `fields`, or an
/// error listing the columns.
pub fn listed_column<'s>(source: &'s SourceColumns, name: &Name) -> Result<(usize, &'s Column)> {
    source.column(&name.text).ok_or_else(|| {
        Error::spanned(
            name.span,
            format!(
                "`{}` has no field `{}` (fields: {})",
                source.name,
                name.text,
                source.column_names()
            ),
        )
    })
}

/// Binds a parsed condition to `source`. Thresholds may appear only among
/// the top-level `and`s, where "the rest of the condition" is clear.
pub fn bind(source: &SourceColumns, cond: &Cond) -> Result<Pred> {
    bind_at(source, cond, true)
}

fn bind_at(source: &SourceColumns, cond: &Cond, top: bool) -> Result<Pred> {
    Ok(match cond {
        Cond::And(a, b) => Pred::And(vec![bind_at(source, a, top)?, bind_at(source, b, top)?]),
        Cond::Or(a, b) => Pred::Or(vec![bind_at(source, a, false)?, bind_at(source, b, false)?]),
        Cond::Not(a) => Pred::Not(Box::new(bind_at(source, a, false)?)),
        Cond::In { field, values } => {
            let (at, column) = self::column(source, field)?;
            let mut all = Vec::new();
            for literal in values {
                all.extend(values_of(column, field, Op::Eq, literal)?);
            }
            all.sort_unstable();
            all.dedup();
            Pred::In {
                column: at,
                values: all,
            }
        }
        Cond::Compare { field, op, value } => {
            let (at, column) = listed_column(source, field)?;
            if let Value::Percentile(q) = value.value {
                if !top || *op == Op::Glob {
                    return Err(Error::spanned(
                        value.span,
                        "a percentile threshold may only be compared with `=`, `<`, `>` and the like, among the top-level `and`s of `where`",
                    ));
                }
                return Ok(Pred::Threshold {
                    column: at,
                    op: *op,
                    q,
                    span: value.span,
                });
            }
            compare_pred(at, column, field, *op, value)?
        }
    })
}

fn compare_pred(at: usize, column: &Column, field: &Name, op: Op, value: &Literal) -> Result<Pred> {
    if matches!(column.kind, Kind::Bytes) {
        return text_pred(at, field, op, value);
    }
    let named = matches!(column.kind, Kind::Named(_)) && matches!(value.value, Value::Text(_));
    if named || op == Op::Glob {
        let values = values_of(column, field, op, value)?;
        let set = Pred::In { column: at, values };
        return match op {
            Op::Eq | Op::Glob => Ok(set),
            Op::Ne => Ok(Pred::Not(Box::new(set))),
            _ => Err(Error::spanned(
                value.span,
                format!(
                    "`{}` compares names with `=`, `!=`, `~` or `in` only",
                    field.text
                ),
            )),
        };
    }
    let ipv6 = matches!(&value.value, Value::Text(t) if t.parse::<std::net::Ipv6Addr>().is_ok());
    if ipv6 && !matches!(op, Op::Eq | Op::Ne) {
        // IPv6 values are numbered as met, so their order means nothing.
        return Err(Error::spanned(
            value.span,
            format!(
                "`{}` compares IPv6 addresses with `=`, `!=` or `in` only",
                field.text
            ),
        ));
    }
    Ok(Pred::Compare {
        column: at,
        op,
        value: number(column, field, value)?,
    })
}

/// A condition on a bytes column: `~` matches a glob against the text
/// the column shows, `=` and `!=` the whole text.
fn text_pred(at: usize, field: &Name, op: Op, literal: &Literal) -> Result<Pred> {
    let Value::Text(text) = &literal.value else {
        return Err(Error::spanned(
            literal.span,
            format!("`{}` holds bytes: compare it with text", field.text),
        ));
    };
    let pred = Pred::Text {
        column: at,
        pattern: text.clone(),
        glob: op == Op::Glob,
    };
    match op {
        Op::Glob | Op::Eq => Ok(pred),
        Op::Ne => Ok(Pred::Not(Box::new(pred))),
        _ => Err(Error::spanned(
            literal.span,
            format!(
                "`{}` holds bytes: it compares with `~`, `=` or `!=` only",
                field.text
            ),
        )),
    }
}

/// The values a literal stands for in `column`: one number, or every value
/// whose name equals (or, for `~`, matches) the text.
fn values_of(column: &Column, field: &Name, op: Op, literal: &Literal) -> Result<Vec<i64>> {
    let (Kind::Named(names), Value::Text(text)) = (&column.kind, &literal.value) else {
        if op == Op::Glob {
            return Err(Error::spanned(
                literal.span,
                format!(
                    "`~` matches names, and `{}` has none; use `=` or `in`",
                    field.text
                ),
            ));
        }
        return Ok(vec![number(column, field, literal)?]);
    };
    let values = if op == Op::Glob {
        names.values_where(|name| glob(text, name))
    } else {
        names.values_where(|name| name == text)
    };
    if values.is_empty() && names.closed && op != Op::Glob {
        return Err(Error::spanned(
            literal.span,
            format!("no `{}` is called \"{text}\"", field.text),
        ));
    }
    Ok(values)
}

/// The number a literal stands for in `column`.
fn number(column: &Column, field: &Name, literal: &Literal) -> Result<i64> {
    match (&column.kind, &literal.value) {
        (Kind::Duration, Value::Duration(ns) | Value::Int(ns)) => Ok(*ns),
        (Kind::Duration, _) => Err(Error::spanned(
            literal.span,
            format!("`{}` is a duration: write it like `5ms`", field.text),
        )),
        (_, Value::Int(n)) => Ok(*n),
        (Kind::Addr(table), Value::Text(t)) => t
            .parse::<std::net::IpAddr>()
            .map(|a| table.value(a))
            .map_err(|_| {
                Error::spanned(
                    literal.span,
                    format!(
                        "`{}` is an IP address, like \"10.0.0.1\" or \"::1\"",
                        field.text
                    ),
                )
            }),
        (Kind::Hex, Value::Text(t)) => (t.len() == 16)
            .then(|| u64::from_str_radix(t, 16).ok())
            .flatten()
            .map(u64::cast_signed)
            .ok_or_else(|| {
                Error::spanned(
                    literal.span,
                    format!("`{}` is a span id: 16 hex digits, like \"00f067aa0ba902b7\"", field.text),
                )
            }),
        (Kind::Id(table), Value::Text(t)) => crate::catalog::parse_id(t)
            .map(|id| table.value(id))
            .ok_or_else(|| {
                Error::spanned(
                    literal.span,
                    format!(
                        "`{}` is a trace id: 32 hex digits, like \"4bf92f3577b34da6a3ce929d0e0e4736\"",
                        field.text
                    ),
                )
            }),
        (Kind::Time, Value::Duration(_)) => Err(Error::spanned(
            literal.span,
            format!(
                "`{}` is a time; choose times with a window such as `last 60s`",
                field.text
            ),
        )),
        (_, Value::Duration(_)) => Err(Error::spanned(
            literal.span,
            format!("`{}` is a number, not a duration", field.text),
        )),
        (_, Value::Text(t)) => Err(Error::spanned(
            literal.span,
            format!(
                "`{}` is a number and has no names; \"{t}\" cannot match it",
                field.text
            ),
        )),
        (_, Value::Percentile(_)) => Err(Error::spanned(
            literal.span,
            "a percentile threshold cannot be used here",
        )),
    }
}

/// Shell-style glob: `*` any run of characters, `?` any one.
pub fn glob(pattern: &str, text: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(text)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_stars_and_marks() {
        assert!(glob("send*", "sendto"));
        assert!(glob("*to", "sendto"));
        assert!(glob("s?nd*o", "sendto"));
        assert!(glob("*", ""));
        assert!(!glob("send", "sendto"));
        assert!(!glob("*x*", "sendto"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
    }
}
