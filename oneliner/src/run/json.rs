//! NDJSON records as bpftrace 0.17 writes them with `-f json`: `": "` and
//! `", "` inside objects and arrays, members in the order bpftrace writes
//! them (not sorted), and tuples tight (`[1,"a"]`), as its tuple printer
//! writes them.

use std::fmt;

use crate::value::Value;

/// A JSON value, kept in the order it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    /// A number, or text already written as JSON.
    Raw(String),
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
}

impl Json {
    /// A number (any integer type).
    pub fn int(n: impl fmt::Display) -> Self {
        Self::Raw(n.to_string())
    }

    pub fn string(text: &str) -> Self {
        Self::Raw(quoted(text))
    }

    /// A value of the language: a tuple as bpftrace writes one, tight.
    pub fn value(value: &Value) -> Self {
        Self::Raw(tight(value))
    }

    pub fn object<K: Into<String>>(members: impl IntoIterator<Item = (K, Json)>) -> Self {
        Self::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Raw(text) => f.write_str(text),
            Self::Object(members) => {
                f.write_str("{")?;
                for (i, (key, value)) in members.iter().enumerate() {
                    let comma = if i > 0 { ", " } else { "" };
                    write!(f, "{comma}{}: {value}", quoted(key))?;
                }
                f.write_str("}")
            }
            Self::Array(elements) => {
                f.write_str("[")?;
                for (i, element) in elements.iter().enumerate() {
                    let comma = if i > 0 { ", " } else { "" };
                    write!(f, "{comma}{element}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// One record, `{"type": KIND, "data": DATA}`.
pub fn line(kind: &str, data: &Json) -> String {
    format!("{{\"type\": {}, \"data\": {data}}}", quoted(kind))
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

fn tight(value: &Value) -> String {
    match value {
        Value::Int(n) => n.to_string(),
        Value::Str(s) => quoted(s),
        Value::Tuple(elements) | Value::Array(elements) => {
            let parts: Vec<String> = elements.iter().map(tight).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Bytes(_) => value.to_string(),
        Value::Buf(_) => quoted(&value.to_string()),
        // bpftrace's spacing: `{ "m": 2, "n": [1,2] }`.
        Value::Record(members) => {
            let parts: Vec<String> = (members.iter())
                .map(|(name, value)| format!("{}: {}", quoted(name), tight(value)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_bpftrace_writes_it() {
        let rows = Json::Array(vec![
            Json::object([
                ("min", Json::int(4)),
                ("max", Json::int(7)),
                ("count", Json::int(1)),
            ]),
            Json::object([
                ("min", Json::int(8)),
                ("max", Json::int(15)),
                ("count", Json::int(0)),
            ]),
        ]);
        assert_eq!(
            line("hist", &Json::object([("@h", rows)])),
            r#"{"type": "hist", "data": {"@h": [{"min": 4, "max": 7, "count": 1}, {"min": 8, "max": 15, "count": 0}]}}"#
        );
        let tuple = Value::Tuple(vec![
            Value::Int(1),
            Value::Tuple(vec![Value::Int(2), Value::Str("b\"".into())]),
        ]);
        assert_eq!(
            line("map", &Json::object([("@t", Json::value(&tuple))])),
            r#"{"type": "map", "data": {"@t": [1,[2,"b\""]]}}"#
        );
    }
}
