//! The query language's grammar: every construct parses to the tree it
//! means, and malformed queries get the exact error users will read.

use weft_query::{
    Span,
    ast::{
        Agg, Cond, Correlate, Func, Literal, Name, Nearness, Op, Query, Stage, Time, Value, Window,
    },
    parse,
};

fn name(text: &str, start: usize) -> Name {
    Name {
        text: text.into(),
        span: Span::new(start, text.len()),
    }
}

fn lit(value: Value, start: usize, len: usize) -> Literal {
    Literal {
        value,
        span: Span::new(start, len),
    }
}

#[test]
fn parse_issue_example_sendto_percentile() {
    let q = parse(r#"syscalls where name = "sendto" | p99.99(dur) last 60s"#).unwrap();
    assert_eq!(
        q,
        Query {
            source: name("syscalls", 0),
            correlate: None,
            filter: Some(Cond::Compare {
                field: name("name", 15),
                op: Op::Eq,
                value: lit(Value::Text("sendto".into()), 22, 8),
            }),
            stages: vec![Stage::Aggregate {
                aggs: vec![Agg {
                    func: Func::Quantile(0.9999),
                    field: Some(name("dur", 40)),
                    span: Span::new(33, 11),
                }],
                by: vec![],
                every: None,
            }],
            window: Some(Window::Last(60_000_000_000)),
        }
    );
}

#[test]
fn parse_issue_example_data_dependent_threshold() {
    let q = parse(r#"syscalls where name = "pread64" and dur > p99.99 last 60s"#).unwrap();
    let Some(Cond::And(_, right)) = q.filter else {
        panic!("expected an and: {:?}", q.filter)
    };
    assert_eq!(
        *right,
        Cond::Compare {
            field: name("dur", 36),
            op: Op::Gt,
            value: lit(Value::Percentile(0.9999), 42, 6),
        }
    );
    assert_eq!(q.window, Some(Window::Last(60_000_000_000)));
}

#[test]
fn parse_issue_example_around_extreme() {
    let q =
        parse("packets around (app | max(latency) last 60s) within 5s where dport = 5555").unwrap();
    let Correlate {
        kind,
        anchors,
        same,
        span,
    } = q.correlate.unwrap();
    assert_eq!(kind, Nearness::Around(5_000_000_000));
    assert_eq!(span, Span::new(8, 6));
    assert!(same.is_empty());
    assert_eq!(anchors.source.text, "app");
    assert_eq!(anchors.window, Some(Window::Last(60_000_000_000)));
    assert!(matches!(
        &anchors.stages[..],
        [Stage::Aggregate { aggs, .. }] if aggs[0].func == Func::Max
    ));
    assert!(matches!(
        q.filter,
        Some(Cond::Compare {
            op: Op::Eq,
            value: Literal {
                value: Value::Int(5555),
                ..
            },
            ..
        })
    ));
}

#[test]
fn parse_issue_example_count_by_comm() {
    let q = parse(r#"pagecache where kind = "add" | count by comm last 10s"#).unwrap();
    assert_eq!(
        q.stages,
        vec![Stage::Aggregate {
            aggs: vec![Agg {
                func: Func::Count,
                field: None,
                span: Span::new(31, 5),
            }],
            by: vec![name("comm", 40)],
            every: None,
        }]
    );
    assert_eq!(q.window, Some(Window::Last(10_000_000_000)));
}

#[test]
fn parse_during_same_tid() {
    let q = parse("syscalls during (app where latency > 10ms) same tid, pid").unwrap();
    let c = q.correlate.unwrap();
    assert_eq!(c.kind, Nearness::During);
    assert_eq!(
        c.same.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(),
        ["tid", "pid"]
    );
}

#[test]
fn parse_conditions_precedence_not_in_glob() {
    let q = parse(r#"s where not a = 1 or b in (2, -3, "x") and c ~ "re*""#).unwrap();
    let Some(Cond::Or(left, right)) = q.filter else {
        panic!("or binds loosest")
    };
    assert!(matches!(*left, Cond::Not(_)));
    let Cond::And(inside, glob) = *right else {
        panic!("and binds tighter than or")
    };
    let Cond::In { values, .. } = *inside else {
        panic!("in list")
    };
    let values: Vec<Value> = values.into_iter().map(|l| l.value).collect();
    assert_eq!(
        values,
        [Value::Int(2), Value::Int(-3), Value::Text("x".into())]
    );
    assert!(matches!(*glob, Cond::Compare { op: Op::Glob, .. }));
}

#[test]
fn parse_parentheses_group() {
    let q = parse("s where (a = 1 or b = 2) and c >= 3").unwrap();
    assert!(matches!(q.filter, Some(Cond::And(l, _)) if matches!(*l, Cond::Or(..))));
}

#[test]
fn parse_aggregates_lists_series() {
    let q =
        parse("s | count, sum(x), min(x), max(x), avg(x), p50(x), percentiles(x) by a, b every 1s")
            .unwrap();
    let [Stage::Aggregate { aggs, by, every }] = &q.stages[..] else {
        panic!("one aggregate stage")
    };
    let funcs: Vec<Func> = aggs.iter().map(|a| a.func).collect();
    assert_eq!(
        funcs,
        [
            Func::Count,
            Func::Sum,
            Func::Min,
            Func::Max,
            Func::Avg,
            Func::Quantile(0.5),
            Func::Percentiles
        ]
    );
    assert_eq!(by.len(), 2);
    assert_eq!(*every, Some(1_000_000_000));
}

#[test]
fn parse_top_sort_limit_fields_hist() {
    let q = parse("s | top 10 by comm | sort count desc | limit 3 | fields comm, count").unwrap();
    assert!(
        matches!(&q.stages[0], Stage::Top { n: 10, agg, by } if agg.func == Func::Count && by[0].text == "comm")
    );
    assert!(matches!(&q.stages[1], Stage::Sort { key, descending: true } if key.text == "count"));
    assert_eq!(q.stages[2], Stage::Limit(3));
    assert!(matches!(&q.stages[3], Stage::Fields(f) if f.len() == 2));
    let q = parse("s | top 5 max(dur) by name | sort max(dur)").unwrap();
    assert!(matches!(&q.stages[0], Stage::Top { n: 5, agg, .. } if agg.func == Func::Max));
    assert!(
        matches!(&q.stages[1], Stage::Sort { key, descending: false } if key.text == "max(dur)")
    );
    let q = parse("s | hist(dur) by name").unwrap();
    assert!(matches!(&q.stages[0], Stage::Aggregate { aggs, .. } if aggs[0].func == Func::Hist));
}

#[test]
fn parse_windows() {
    let window = |text: &str| parse(text).unwrap().window.unwrap();
    assert_eq!(
        window("s [now-80s, now-20s]"),
        Window::Range(Time::Now(-80_000_000_000), Time::Now(-20_000_000_000))
    );
    assert_eq!(
        window("s | count [start+1.5s, now]"),
        Window::Range(Time::Start(1_500_000_000), Time::Now(0))
    );
    assert_eq!(
        window("s [12345, 67890]"),
        Window::Range(Time::Monotonic(12_345), Time::Monotonic(67_890))
    );
    assert_eq!(
        window(r#"s ["2026-11-22 05:31:10.5", "2026-11-22T05:31:11Z"]"#),
        Window::Range(
            Time::Wall(1_795_325_470_500_000_000, Span::new(3, 23)),
            Time::Wall(1_795_325_471_000_000_000, Span::new(28, 22))
        )
    );
    assert_eq!(
        window("s where a = 1 last 2m | count"),
        Window::Last(120_000_000_000)
    );
}

#[test]
fn parse_units_and_bare_words() {
    fn walk(c: &Cond, out: &mut Vec<Value>) {
        match c {
            Cond::And(a, b) | Cond::Or(a, b) => {
                walk(a, out);
                walk(b, out);
            }
            Cond::Compare { value, .. } => out.push(value.value.clone()),
            _ => {}
        }
    }
    let q = parse("s where dur >= 1.5ms and name = sendto and d < 250us").unwrap();
    let mut values = Vec::new();
    walk(&q.filter.unwrap(), &mut values);
    assert_eq!(
        values,
        [
            Value::Duration(1_500_000),
            Value::Text("sendto".into()),
            Value::Duration(250_000)
        ]
    );
}

/// Each malformed query and the exact message (with caret) it gets.
#[test]
fn parse_errors_point_at_the_token() {
    let cases: &[(&str, &str)] = &[
        (
            "",
            "expected a source name, found the end of the query\n  \n  ^",
        ),
        (
            "syscalls where",
            "expected a field name, found the end of the query\n  syscalls where\n                ^",
        ),
        (
            "syscalls where dur >",
            "expected a value (a number, a duration such as `5ms`, a string or `p99`), found the end of the query\n  syscalls where dur >\n                      ^",
        ),
        (
            "syscalls where dur 5ms",
            "expected an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`, `~` or `in`), found a duration\n  syscalls where dur 5ms\n                     ^^^",
        ),
        (
            "syscalls | p99(dur last 60s",
            "expected `)`, found `last`\n  syscalls | p99(dur last 60s\n                     ^^^^",
        ),
        (
            "syscalls | median(dur)",
            "expected an aggregate (count, sum, min, max, avg, pNN, percentiles, hist), `top`, `sort`, `limit`, `fields` or `explain`, found `median`\n  syscalls | median(dur)\n             ^^^^^^",
        ),
        (
            "syscalls | p101(dur)",
            "`p101` is not a percentile between p0 and p100\n  syscalls | p101(dur)\n             ^^^^",
        ),
        (
            "syscalls last 60",
            "expected a duration such as `60s`, found number 60\n  syscalls last 60\n                ^^",
        ),
        (
            "syscalls where dur > 5xs",
            "unknown unit `xs` (expected ns, us, ms, s, m or h)\n  syscalls where dur > 5xs\n                       ^^^",
        ),
        (
            "syscalls where name = \"sendto",
            "string is not closed\n  syscalls where name = \"sendto\n                        ^^^^^^^",
        ),
        (
            "syscalls where a = 1 last 5s | count last 5s",
            "the query already has a window\n  syscalls where a = 1 last 5s | count last 5s\n                                       ^^^^",
        ),
        (
            "syscalls count",
            "unexpected `count` after the query (expected `|`, `last`, `[` or the end)\n  syscalls count\n           ^^^^^",
        ),
        (
            "packets around (app | max(latency)) where x = 1",
            "expected `within`, found `where`\n  packets around (app | max(latency)) where x = 1\n                                      ^^^^^",
        ),
        (
            "syscalls [now-80s now-20s]",
            "expected `,`, found `now`\n  syscalls [now-80s now-20s]\n                    ^^^",
        ),
        (
            "syscalls [\"yesterday\", now]",
            "`yesterday` is not a UTC time of the form \"YYYY-MM-DD HH:MM:SS\"\n  syscalls [\"yesterday\", now]\n            ^^^^^^^^^^^",
        ),
        (
            "syscalls | top by comm",
            "expected how many groups to keep, such as `10`, found `by`\n  syscalls | top by comm\n                 ^^",
        ),
        (
            "syscalls where dur > -5ms",
            "durations cannot be negative\n  syscalls where dur > -5ms\n                       ^^^^",
        ),
        (
            "syscalls where pid = 1.5",
            "expected a whole number\n  syscalls where pid = 1.5\n                       ^^^",
        ),
        (
            "syscalls where a # 1",
            "unexpected character `#`\n  syscalls where a # 1\n                   ^",
        ),
    ];
    for (query, expected) in cases {
        let error = parse(query).expect_err(query);
        assert_eq!(error.render(query), *expected, "for {query:?}");
    }
}

#[test]
fn parse_names_finds_fields_anywhere() {
    let q = parse(r#"s around (t where comm = "x") within 1s | count by name"#).unwrap();
    assert!(q.names("comm") && q.names("name"));
    assert!(!q.names("tid"));
    assert!(!parse(r#"s where name = "comm""#).unwrap().names("comm"));
}
