//! Prometheus's two exposition formats for one set of metrics: the metrics
//! are built once as `io.prometheus.client.MetricFamily` messages (the
//! fields weft uses, declared with prost's derive) and written either as
//! text (`text/plain; version=0.0.4`, which has classic histograms only)
//! or as length-delimited protobuf, the format a Prometheus server asks for
//! when it takes native histograms.

use std::fmt::Write as _;

use prost::Message;

/// What a scrape answers in protobuf, as its `Content-Type`.
pub const PROTOBUF: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// What a scrape answers in text.
pub const TEXT: &str = "text/plain; version=0.0.4";

/// `MetricType`'s values weft writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Kind {
    Counter = 0,
    Gauge = 1,
    Histogram = 4,
}

#[derive(Clone, PartialEq, Message)]
pub struct MetricFamily {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub help: String,
    #[prost(int32, tag = "3")]
    pub kind: i32,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Value>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Value>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
pub struct LabelPair {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// A `Gauge` or a `Counter`: both hold their value in field 1.
#[derive(Clone, PartialEq, Message)]
pub struct Value {
    #[prost(double, tag = "1")]
    pub value: f64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Histogram {
    #[prost(uint64, tag = "1")]
    pub sample_count: u64,
    #[prost(double, tag = "2")]
    pub sample_sum: f64,
    /// The classic buckets, cumulative, by increasing upper bound.
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    /// The native buckets: each power of two split in `2^schema`.
    #[prost(sint32, tag = "5")]
    pub schema: i32,
    /// Values at or below it count in `zero_count`.
    #[prost(double, tag = "6")]
    pub zero_threshold: f64,
    #[prost(uint64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    /// Each bucket's count minus the one before it (the first's minus 0).
    #[prost(sint64, repeated, tag = "13")]
    pub positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Bucket {
    #[prost(uint64, tag = "1")]
    pub cumulative_count: u64,
    #[prost(double, tag = "2")]
    pub upper_bound: f64,
}

/// `length` buckets in a row, `offset` after the previous span's last
/// (for the first span: its first bucket's index).
#[derive(Clone, PartialEq, Message)]
pub struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

impl MetricFamily {
    pub fn new(name: &str, help: &str, kind: Kind) -> Self {
        Self {
            name: name.to_owned(),
            help: help.to_owned(),
            kind: kind as i32,
            metric: Vec::new(),
        }
    }

    /// Adds a counter's or a gauge's `value` with `labels`.
    pub fn push(&mut self, labels: &[(&str, &str)], value: f64) {
        let value = Some(Value { value });
        let counter = self.kind == Kind::Counter as i32;
        self.metric.push(Metric {
            label: label_pairs(labels),
            counter: if counter { value.clone() } else { None },
            gauge: if counter { None } else { value },
            histogram: None,
        });
    }
}

/// Labels as messages.
pub fn label_pairs(labels: &[(&str, &str)]) -> Vec<LabelPair> {
    labels
        .iter()
        .map(|(name, value)| LabelPair {
            name: (*name).to_owned(),
            value: (*value).to_owned(),
        })
        .collect()
}

/// Whether a scrape's `Accept` header (in its request head) takes
/// protobuf: a Prometheus server asks for it when native histograms are
/// on, and text otherwise.
pub fn wants_protobuf(head: &str) -> bool {
    head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept")
                && value.contains("application/vnd.google.protobuf")
                && value.contains("io.prometheus.client.MetricFamily")
        })
    })
}

/// The families as length-delimited protobuf messages.
pub fn protobuf(families: &[MetricFamily]) -> Vec<u8> {
    let mut out = Vec::new();
    for family in families {
        family
            .encode_length_delimited(&mut out)
            .expect("a Vec grows as needed");
    }
    out
}

/// The families in the text format: classic histograms only (native
/// buckets have no text form in this format).
pub fn text(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for family in families {
        let name = &family.name;
        let kind = match family.kind {
            0 => "counter",
            1 => "gauge",
            _ => "histogram",
        };
        let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", family.help);
        for metric in &family.metric {
            let labels = |extra: Option<(&str, &str)>| {
                let pairs: Vec<String> = metric
                    .label
                    .iter()
                    .map(|l| (l.name.as_str(), l.value.as_str()))
                    .chain(extra)
                    .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
                    .collect();
                format!("{{{}}}", pairs.join(","))
            };
            if let Some(value) = metric.counter.as_ref().or(metric.gauge.as_ref()) {
                let _ = writeln!(out, "{name}{} {}", labels(None), value.value);
            }
            if let Some(h) = &metric.histogram {
                for bucket in &h.bucket {
                    let le = format!("{:e}", bucket.upper_bound);
                    let le = if bucket.upper_bound.is_infinite() {
                        "+Inf"
                    } else {
                        &le
                    };
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {}",
                        labels(Some(("le", le))),
                        bucket.cumulative_count
                    );
                }
                let _ = writeln!(out, "{name}_sum{} {}", labels(None), h.sample_sum);
                let _ = writeln!(out, "{name}_count{} {}", labels(None), h.sample_count);
            }
        }
    }
    out
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prometheus_that_takes_native_histograms_is_answered_in_protobuf() {
        // Prometheus 2.42's Accept with and without native histograms.
        let native = "GET /metrics HTTP/1.1\r\nAccept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3\r\n\r\n";
        let text = "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n";
        assert!(wants_protobuf(native));
        assert!(!wants_protobuf(text));
        assert!(!wants_protobuf("GET /metrics HTTP/1.0\r\n\r\n"));
    }

    #[test]
    fn families_read_back_from_their_protobuf() {
        let mut family = MetricFamily::new("weft_lost_total", "Lost", Kind::Counter);
        family.push(&[("source", "syscalls")], 3.0);
        let bytes = protobuf(&[family.clone(), family.clone()]);
        let mut rest = bytes.as_slice();
        for _ in 0..2 {
            assert_eq!(
                MetricFamily::decode_length_delimited(&mut rest).unwrap(),
                family
            );
        }
        assert!(rest.is_empty());
        assert_eq!(
            text(&[family]),
            "# HELP weft_lost_total Lost\n# TYPE weft_lost_total counter\nweft_lost_total{source=\"syscalls\"} 3\n"
        );
    }
}
