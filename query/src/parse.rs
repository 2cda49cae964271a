//! A recursive-descent parser from tokens to [`Query`]. Every error names
//! what was found and what was expected there.

use crate::{
    ast::{
        Agg, Cond, Correlate, Func, Literal, Name, Nearness, Op, Query, Stage, Time, Value, Window,
    },
    error::{Error, Result, Span},
    lex::{Token, tokenize},
};

/// Words that end a condition or a stage, so they cannot name fields.
const KEYWORDS: [&str; 17] = [
    "where", "and", "or", "not", "in", "by", "every", "last", "around", "during", "within", "same",
    "top", "sort", "limit", "fields", "now",
];

/// Parses a whole query.
pub fn parse(text: &str) -> Result<Query> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
        end: text.len(),
    };
    let query = parser.query()?;
    if let Some((token, span)) = parser.peek_spanned() {
        return Err(Error::spanned(
            span,
            format!(
                "unexpected {} after the query (expected `|`, `last`, `[` or the end)",
                token.describe()
            ),
        ));
    }
    Ok(query)
}

struct Parser {
    tokens: Vec<(Token, Span)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(t, _)| t)
    }

    fn peek_spanned(&self) -> Option<(Token, Span)> {
        self.tokens.get(self.pos).cloned()
    }

    /// The span of the next token, or an empty span at the end.
    fn here(&self) -> Span {
        self.tokens
            .get(self.pos)
            .map_or(Span::new(self.end, 0), |(_, s)| *s)
    }

    fn error(&self, expected: &str) -> Error {
        let found = self
            .peek()
            .map_or_else(|| "the end of the query".to_owned(), Token::describe);
        Error::spanned(self.here(), format!("expected {expected}, found {found}"))
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn is_punct(&self, punct: &str) -> bool {
        matches!(self.peek(), Some(Token::Punct(p)) if *p == punct)
    }

    /// Consumes `word` if it is next.
    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.is_word(word);
        self.pos += usize::from(found);
        found
    }

    fn eat_punct(&mut self, punct: &str) -> bool {
        let found = self.is_punct(punct);
        self.pos += usize::from(found);
        found
    }

    fn expect_punct(&mut self, punct: &str) -> Result<Span> {
        let span = self.here();
        if self.eat_punct(punct) {
            Ok(span)
        } else {
            Err(self.error(&format!("`{punct}`")))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<()> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.error(&format!("`{word}`")))
        }
    }

    /// A name that is not a keyword.
    fn name(&mut self, what: &str) -> Result<Name> {
        match self.peek_spanned() {
            Some((Token::Word(text), span)) if !KEYWORDS.contains(&text.as_str()) => {
                self.pos += 1;
                Ok(Name { text, span })
            }
            _ => Err(self.error(what)),
        }
    }

    fn names(&mut self, what: &str) -> Result<Vec<Name>> {
        let mut names = vec![self.name(what)?];
        while self.eat_punct(",") {
            names.push(self.name(what)?);
        }
        Ok(names)
    }

    fn duration(&mut self, what: &str) -> Result<i64> {
        match self.peek() {
            Some(Token::Duration(ns)) => {
                let ns = *ns;
                self.pos += 1;
                Ok(ns)
            }
            _ => Err(self.error(what)),
        }
    }

    fn count(&mut self, what: &str) -> Result<usize> {
        match self.peek() {
            Some(Token::Number(n)) if n.fract() == 0.0 && *n >= 1.0 && *n < 1e12 => {
                #[expect(clippy::cast_sign_loss, reason = "checked positive above")]
                let n = *n as usize;
                self.pos += 1;
                Ok(n)
            }
            _ => Err(self.error(what)),
        }
    }

    fn query(&mut self) -> Result<Query> {
        let source = self.name("a source name")?;
        let correlate = self.correlate()?;
        let filter = if self.eat_word("where") {
            Some(self.or()?)
        } else {
            None
        };
        let mut window = self.window()?;
        let mut stages = Vec::new();
        while self.eat_punct("|") {
            stages.push(self.stage()?);
        }
        if window.is_none() {
            window = self.window()?;
        } else if self.is_word("last") || self.is_punct("[") {
            return Err(Error::spanned(
                self.here(),
                "the query already has a window",
            ));
        }
        Ok(Query {
            source,
            correlate,
            filter,
            stages,
            window,
        })
    }

    fn correlate(&mut self) -> Result<Option<Correlate>> {
        let span = self.here();
        let around = self.eat_word("around");
        if !around && !self.eat_word("during") {
            return Ok(None);
        }
        self.expect_punct("(")?;
        let anchors = Box::new(self.query()?);
        self.expect_punct(")")?;
        let kind = if around {
            self.expect_word("within")?;
            Nearness::Around(self.duration("a duration such as `5s`")?)
        } else {
            Nearness::During
        };
        let same = if self.eat_word("same") {
            self.names("a field name")?
        } else {
            Vec::new()
        };
        Ok(Some(Correlate {
            kind,
            anchors,
            same,
            span,
        }))
    }

    fn or(&mut self) -> Result<Cond> {
        let mut left = self.and()?;
        while self.eat_word("or") {
            left = Cond::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Cond> {
        let mut left = self.unary()?;
        while self.eat_word("and") {
            left = Cond::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Cond> {
        if self.eat_word("not") {
            return Ok(Cond::Not(Box::new(self.unary()?)));
        }
        if self.eat_punct("(") {
            let inner = self.or()?;
            self.expect_punct(")")?;
            return Ok(inner);
        }
        let field = self.name("a field name")?;
        if self.eat_word("in") {
            self.expect_punct("(")?;
            let mut values = vec![self.literal()?];
            while self.eat_punct(",") {
                values.push(self.literal()?);
            }
            self.expect_punct(")")?;
            return Ok(Cond::In { field, values });
        }
        let op = match self.peek() {
            Some(Token::Punct("=")) => Op::Eq,
            Some(Token::Punct("!=")) => Op::Ne,
            Some(Token::Punct("<")) => Op::Lt,
            Some(Token::Punct("<=")) => Op::Le,
            Some(Token::Punct(">")) => Op::Gt,
            Some(Token::Punct(">=")) => Op::Ge,
            Some(Token::Punct("~")) => Op::Glob,
            _ => {
                return Err(
                    self.error("an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`, `~` or `in`)")
                );
            }
        };
        self.pos += 1;
        let value = self.literal()?;
        Ok(Cond::Compare { field, op, value })
    }

    fn literal(&mut self) -> Result<Literal> {
        let start = self.here();
        let negative = self.eat_punct("-");
        let what = "a value (a number, a duration such as `5ms`, a string or `p99`)";
        let Some((token, span)) = self.peek_spanned() else {
            return Err(self.error(what));
        };
        let value = match token {
            Token::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => Value::Int(n as i64),
            Token::Number(_) => {
                return Err(Error::spanned(span, "expected a whole number"));
            }
            Token::Duration(ns) => Value::Duration(ns),
            Token::Str(s) if !negative => Value::Text(s),
            Token::Word(w) if !negative && !KEYWORDS.contains(&w.as_str()) => {
                match percentile(&w, span)? {
                    Some(q) => Value::Percentile(q),
                    None => Value::Text(w),
                }
            }
            _ => return Err(self.error(what)),
        };
        self.pos += 1;
        let value = match value {
            Value::Int(n) if negative => Value::Int(-n),
            Value::Duration(_) if negative => {
                return Err(Error::spanned(
                    start.to(span),
                    "durations cannot be negative",
                ));
            }
            v => v,
        };
        Ok(Literal {
            value,
            span: start.to(span),
        })
    }

    fn stage(&mut self) -> Result<Stage> {
        if self.eat_word("top") {
            let n = self.count("how many groups to keep, such as `10`")?;
            let agg = if self.is_word("by") {
                Agg {
                    func: Func::Count,
                    field: None,
                    span: self.here(),
                }
            } else {
                self.agg()?
            };
            self.expect_word("by")?;
            let by = self.names("a field to group by")?;
            return Ok(Stage::Top { n, agg, by });
        }
        if self.eat_word("sort") {
            let key = self.sort_key()?;
            let descending = if self.eat_word("desc") {
                true
            } else {
                self.eat_word("asc");
                false
            };
            return Ok(Stage::Sort { key, descending });
        }
        if self.eat_word("limit") {
            return Ok(Stage::Limit(self.count("a row count, such as `10`")?));
        }
        if self.eat_word("fields") {
            return Ok(Stage::Fields(self.names("a field name")?));
        }
        if self.is_word("explain") {
            let span = self.here();
            self.pos += 1;
            return Ok(Stage::Explain(span));
        }
        let mut aggs = vec![self.agg()?];
        while self.eat_punct(",") {
            aggs.push(self.agg()?);
        }
        let by = if self.eat_word("by") {
            self.names("a field to group by")?
        } else {
            Vec::new()
        };
        let every = if self.eat_word("every") {
            Some(self.duration("an interval such as `1s`")?).filter(|ns| *ns > 0)
        } else {
            None
        };
        Ok(Stage::Aggregate { aggs, by, every })
    }

    /// A field, or an aggregate column written as its call: `p99(dur)`.
    fn sort_key(&mut self) -> Result<Name> {
        let name = self.name("a field or an aggregate such as `count` or `max(dur)`")?;
        if !self.is_punct("(") {
            return Ok(name);
        }
        self.pos += 1;
        let arg = if self.is_punct(")") {
            None
        } else {
            Some(self.name("a field name")?)
        };
        let close = self.expect_punct(")")?;
        let text = match arg {
            Some(arg) => format!("{}({})", name.text, arg.text),
            None => name.text,
        };
        Ok(Name {
            text,
            span: name.span.to(close),
        })
    }

    fn agg(&mut self) -> Result<Agg> {
        let expected = "an aggregate (count, sum, min, max, avg, pNN, percentiles, hist), `top`, `sort`, `limit`, `fields` or `explain`";
        let Some((Token::Word(word), span)) = self.peek_spanned() else {
            return Err(self.error(expected));
        };
        let func = match word.as_str() {
            "count" => Func::Count,
            "sum" => Func::Sum,
            "min" => Func::Min,
            "max" => Func::Max,
            "avg" => Func::Avg,
            "percentiles" => Func::Percentiles,
            "hist" => Func::Hist,
            w => match percentile(w, span)? {
                Some(q) => Func::Quantile(q),
                None => return Err(self.error(expected)),
            },
        };
        self.pos += 1;
        if func == Func::Count {
            // `count` and `count()` alike.
            let mut end = span;
            if self.eat_punct("(") {
                end = self.expect_punct(")")?;
            }
            return Ok(Agg {
                func,
                field: None,
                span: span.to(end),
            });
        }
        self.expect_punct("(")?;
        let field = self.name("a field name")?;
        let close = self.expect_punct(")")?;
        Ok(Agg {
            func,
            field: Some(field),
            span: span.to(close),
        })
    }

    fn window(&mut self) -> Result<Option<Window>> {
        if self.eat_word("last") {
            let ns = self.duration("a duration such as `60s`")?;
            return Ok(Some(Window::Last(ns)));
        }
        if !self.eat_punct("[") {
            return Ok(None);
        }
        let from = self.time()?;
        self.expect_punct(",")?;
        let to = self.time()?;
        self.expect_punct("]")?;
        Ok(Some(Window::Range(from, to)))
    }

    fn time(&mut self) -> Result<Time> {
        let what = "a time (`now`, `now-20s`, `start+5s`, a \"YYYY-MM-DD HH:MM:SS\" UTC time or monotonic ns)";
        let Some((token, span)) = self.peek_spanned() else {
            return Err(self.error(what));
        };
        self.pos += 1;
        match token {
            Token::Word(w) if w == "now" || w == "start" => {
                let offset = if self.eat_punct("-") {
                    -self.duration("a duration such as `20s`")?
                } else if self.eat_punct("+") {
                    self.duration("a duration such as `20s`")?
                } else {
                    0
                };
                Ok(if w == "now" {
                    Time::Now(offset)
                } else {
                    Time::Start(offset)
                })
            }
            Token::Str(s) => Ok(Time::Wall(wall_clock(&s, span)?, span)),
            #[expect(clippy::cast_sign_loss, reason = "checked not negative")]
            Token::Number(n) if n.fract() == 0.0 && n >= 0.0 => Ok(Time::Monotonic(n as u64)),
            _ => {
                self.pos -= 1;
                Err(self.error(what))
            }
        }
    }
}

/// `p50` → 0.5, `p99.99` → 0.9999; `None` for words that are not `pNN`.
fn percentile(word: &str, span: Span) -> Result<Option<f64>> {
    let Some(digits) = word.strip_prefix('p') else {
        return Ok(None);
    };
    if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(None);
    }
    // 99.99 as 9999 / 10^4: one correctly rounded division, so p99.99 is
    // exactly the f64 nearest 0.9999 and ranks come out right.
    let (whole, decimals) = digits.split_once('.').unwrap_or((digits, ""));
    let parsed = format!("{whole}{decimals}").parse::<u64>();
    match parsed {
        Ok(n) if decimals.len() < 10 && !digits.ends_with('.') && whole.len() < 4 => {
            let q = n as f64 / (100 * 10u64.pow(decimals.len() as u32)) as f64;
            if q <= 1.0 {
                Ok(Some(q))
            } else {
                Err(Error::spanned(
                    span,
                    format!("`{word}` is not a percentile between p0 and p100"),
                ))
            }
        }
        _ => Err(Error::spanned(
            span,
            format!("`{word}` is not a percentile between p0 and p100"),
        )),
    }
}

/// Parses `YYYY-MM-DD HH:MM:SS[.fff]` (or with `T`, optional trailing `Z`),
/// UTC, into ns since the Unix epoch.
fn wall_clock(text: &str, span: Span) -> Result<i64> {
    let bad = || {
        Error::spanned(
            span,
            format!("`{text}` is not a UTC time of the form \"YYYY-MM-DD HH:MM:SS\""),
        )
    };
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once(['T', ' ']).ok_or_else(bad)?;
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let mut dates = date.splitn(3, '-');
    let (year, month, day) = (
        num(dates.next().ok_or_else(bad)?)?,
        num(dates.next().ok_or_else(bad)?)?,
        num(dates.next().ok_or_else(bad)?)?,
    );
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clocks = clock.splitn(3, ':');
    let (hour, minute, second) = (
        num(clocks.next().ok_or_else(bad)?)?,
        num(clocks.next().ok_or_else(bad)?)?,
        num(clocks.next().unwrap_or("0"))?,
    );
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..=60).contains(&second);
    if !valid {
        return Err(bad());
    }
    let nanos = if fraction.is_empty() {
        0
    } else if fraction.len() <= 9 && fraction.bytes().all(|b| b.is_ascii_digit()) {
        num(fraction)? * 10i64.pow(9 - fraction.len() as u32)
    } else {
        return Err(bad());
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Ok(seconds * 1_000_000_000 + nanos)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
