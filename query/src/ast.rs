//! The parsed form of a query, before names are resolved against a capture.

use crate::error::Span;

/// A name as written, with where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The text.
    pub text: String,
    /// Where.
    pub span: Span,
}

/// `SOURCE [around|during (...)] [where COND] [| STAGE]... [WINDOW]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The source whose records flow into the pipeline.
    pub source: Name,
    /// Keeps only records near those of a sub-query.
    pub correlate: Option<Correlate>,
    /// Keeps only records for which this holds.
    pub filter: Option<Cond>,
    /// Pipeline stages, in order.
    pub stages: Vec<Stage>,
    /// The time window; the whole capture when absent.
    pub window: Option<Window>,
}

impl Query {
    /// Whether the answer lists records (no aggregate stage).
    pub fn lists_records(&self) -> bool {
        !self.stages.iter().any(|s| {
            matches!(
                s,
                Stage::Aggregate { .. } | Stage::Top { .. } | Stage::Explain(_)
            )
        })
    }

    /// Where the query (sub-queries included) compares with a percentile,
    /// if it does.
    pub fn threshold(&self) -> Option<Span> {
        self.filter
            .as_ref()
            .and_then(Cond::threshold)
            .or_else(|| self.correlate.as_ref().and_then(|c| c.anchors.threshold()))
    }

    /// Whether any part of the query (sub-queries included) names `field`.
    pub fn names(&self, field: &str) -> bool {
        let is = |n: &Name| n.text == field;
        let agg = |a: &Agg| a.field.as_ref().is_some_and(is);
        self.filter.as_ref().is_some_and(|c| c.names(field))
            || self
                .correlate
                .as_ref()
                .is_some_and(|c| c.same.iter().any(is) || c.anchors.names(field))
            || self.stages.iter().any(|stage| match stage {
                Stage::Aggregate { aggs, by, .. } => aggs.iter().any(agg) || by.iter().any(is),
                Stage::Top { agg: a, by, .. } => agg(a) || by.iter().any(is),
                Stage::Sort { key, .. } => key.text.contains(field),
                Stage::Fields(names) => names.iter().any(is),
                Stage::Limit(_) | Stage::Explain(_) => false,
            })
    }
}

impl Cond {
    /// Where the condition compares with a percentile, if it does.
    pub fn threshold(&self) -> Option<Span> {
        match self {
            Self::And(a, b) | Self::Or(a, b) => a.threshold().or_else(|| b.threshold()),
            Self::Not(a) => a.threshold(),
            Self::Compare { value, .. } => {
                matches!(value.value, Value::Percentile(_)).then_some(value.span)
            }
            Self::In { values, .. } => values
                .iter()
                .find(|v| matches!(v.value, Value::Percentile(_)))
                .map(|v| v.span),
        }
    }

    /// Whether the condition names `field`.
    pub fn names(&self, field: &str) -> bool {
        match self {
            Self::And(a, b) | Self::Or(a, b) => a.names(field) || b.names(field),
            Self::Not(a) => a.names(field),
            Self::Compare { field: f, .. } | Self::In { field: f, .. } => f.text == field,
        }
    }
}

/// A correlation with the records a sub-query selects.
#[derive(Clone, Debug, PartialEq)]
pub struct Correlate {
    /// Around each selected record, or during it.
    pub kind: Nearness,
    /// The sub-query selecting the anchor records.
    pub anchors: Box<Query>,
    /// Fields whose values must match the anchor's (`same tid`).
    pub same: Vec<Name>,
    /// The `around`/`during` keyword, for errors.
    pub span: Span,
}

/// How near to an anchor record a record must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nearness {
    /// Within this many ns of the anchor's time, either side.
    Around(i64),
    /// Inside the anchor's own span (its start to its time).
    During,
}

/// A boolean condition on one record's fields.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    /// Both hold.
    And(Box<Cond>, Box<Cond>),
    /// Either holds.
    Or(Box<Cond>, Box<Cond>),
    /// It does not hold.
    Not(Box<Cond>),
    /// `FIELD OP VALUE`.
    Compare {
        /// The field.
        field: Name,
        /// The operator.
        op: Op,
        /// The value.
        value: Literal,
    },
    /// `FIELD in (VALUE, ...)`.
    In {
        /// The field.
        field: Name,
        /// The values.
        values: Vec<Literal>,
    },
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `~`: glob match on the field's text.
    Glob,
}

impl Op {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::Ne => "!=",
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Glob => "~",
        }
    }
}

/// A value as written in a condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Literal {
    /// Its kind and value.
    pub value: Value,
    /// Where.
    pub span: Span,
}

/// The kinds of literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A duration, in ns.
    Duration(i64),
    /// A quoted string or a bare word (`"sendto"`, `sendto`).
    Text(String),
    /// `pNN`: the field's NN-th percentile over the records the rest of
    /// the condition selects in the window (a data-dependent threshold).
    Percentile(f64),
}

/// A pipeline stage after `|`.
#[derive(Clone, Debug, PartialEq)]
pub enum Stage {
    /// `AGG, ... [by FIELD, ...] [every DURATION]`.
    Aggregate {
        /// The aggregates, one or more columns each.
        aggs: Vec<Agg>,
        /// Group-by fields.
        by: Vec<Name>,
        /// Series interval in ns.
        every: Option<i64>,
    },
    /// `top N [AGG] by FIELD, ...`: the N groups with the largest AGG (count).
    Top {
        /// How many groups.
        n: usize,
        /// Ranked by this.
        agg: Agg,
        /// The groups.
        by: Vec<Name>,
    },
    /// `sort KEY [asc|desc]`.
    Sort {
        /// A field, or an aggregate column such as `p99(dur)`.
        key: Name,
        /// Largest first.
        descending: bool,
    },
    /// `limit N`.
    Limit(usize),
    /// `fields FIELD, ...`: only these columns.
    Fields(Vec<Name>),
    /// `explain`: where the selected calls' wall time went (on CPU, in the
    /// run queue, off CPU by why), against the same calls without the
    /// threshold. Where the word was written, for errors.
    Explain(Span),
}

/// An aggregate function applied to a field.
#[derive(Clone, Debug, PartialEq)]
pub struct Agg {
    /// Which function.
    pub func: Func,
    /// Its field (`count` has none).
    pub field: Option<Name>,
    /// The whole call, for errors.
    pub span: Span,
}

/// Aggregate functions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Func {
    /// Number of records.
    Count,
    /// Sum of the field.
    Sum,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
    /// Mean.
    Avg,
    /// An exact nearest-rank quantile, 0 to 1.
    Quantile(f64),
    /// p50, p90, p99, p99.9, p99.99 and max at once.
    Percentiles,
    /// A power-of-two histogram, drawn like bpftrace's `hist()`.
    Hist,
}

/// The time window a query covers.
#[derive(Clone, Debug, PartialEq)]
pub enum Window {
    /// The last so many ns before "now" (the capture's end for a recording).
    Last(i64),
    /// `[FROM, TO]`.
    Range(Time, Time),
}

/// A point in time in a window.
#[derive(Clone, Debug, PartialEq)]
pub enum Time {
    /// `now`, `now-80s`: offset in ns from now.
    Now(i64),
    /// `start`, `start+10s`: offset in ns from the capture's first record.
    Start(i64),
    /// A wall-clock time, `"2026-11-22T05:31:10Z"`, as ns since the Unix epoch.
    Wall(i64, Span),
    /// A raw `CLOCK_MONOTONIC` time in ns, as stored.
    Monotonic(u64),
}
