//! A query's answer: a table of typed cells, printable as an aligned
//! table, JSON lines or CSV.

use std::fmt::Write as _;

use weft_store::QueryStats;

use crate::catalog::Kind;

/// Rows and columns, and how they were found.
#[derive(Clone, Debug, Default)]
pub struct Answer {
    /// Column headers.
    pub columns: Vec<Header>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
    /// Store work over all the operators the query used.
    pub stats: QueryStats,
    /// How the query was answered, one step a line (`--explain`).
    pub plan: Vec<String>,
    /// Records of the query's source lost in its window (the `losses`
    /// source's count), which the answer cannot hold.
    pub lost: u64,
    /// Where deleted records were answered for from the summaries kept of
    /// them: how approximate the answer is, as a sentence.
    pub approximate: Option<String>,
}

/// A column's name and the meaning of its numbers.
#[derive(Clone, Debug)]
pub struct Header {
    /// As printed, e.g. `p99.99(dur)`.
    pub name: String,
    /// How its numbers print.
    pub kind: Kind,
}

/// One value.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// No value (an aggregate over nothing, a short record).
    Null,
    /// An integer, meant as its column's kind says.
    Int(i64),
    /// A fraction (averages).
    Float(f64),
    /// Text (names, histogram bars).
    Text(String),
}

impl Answer {
    /// How approximate an answer with these `stats` is, if the summaries of
    /// deleted records answered for them: its time resolution and, where a
    /// summary was split by value, its error bound (in the units of the
    /// answer's first duration column, if it has one).
    pub fn approximation(&self) -> Option<String> {
        let s = &self.stats;
        if s.chunks_rolled_up == 0 {
            return None;
        }
        // Not a count of chunks: each operator of a query counts those it
        // read, and several may read the same (`--explain` has the sum).
        let mut text = format!(
            "records deleted from this window were answered for by their kept summaries: times to within {}",
            duration(s.rolled_up_span as f64)
        );
        if s.rolled_up_error > 0 {
            let kind = (self.columns.iter())
                .map(|c| &c.kind)
                .find(|k| matches!(k, Kind::Duration))
                .unwrap_or(&Kind::Int);
            let error = i64::try_from(s.rolled_up_error).unwrap_or(i64::MAX);
            let _ = write!(
                text,
                ", values to within {}",
                human(&Cell::Int(error), kind, None)
            );
        }
        Some(text)
    }

    /// One cell as people read it: durations and times in human units.
    pub fn text(&self, row: usize, column: usize, wall_offset: Option<i64>) -> String {
        human(
            &self.rows[row][column],
            &self.columns[column].kind,
            wall_offset,
        )
    }

    /// An aligned table with a header line; numbers right-aligned,
    /// durations and times in human units.
    pub fn to_table(&self, wall_offset: Option<i64>) -> String {
        let rendered: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                row.iter()
                    .zip(&self.columns)
                    .map(|(cell, header)| human(cell, &header.kind, wall_offset))
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, h)| {
                rendered
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([h.name.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = (usize, &str, bool)>| {
            let mut text = String::new();
            for (width, cell, right) in cells {
                if !text.is_empty() {
                    text.push_str("  ");
                }
                let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                if right {
                    let _ = write!(text, "{pad}{cell}");
                } else {
                    let _ = write!(text, "{cell}{pad}");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        let left: Vec<bool> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, h)| {
                h.kind.is_text()
                    || matches!(h.kind, Kind::Time)
                    || self.rows.iter().any(|r| matches!(r[i], Cell::Text(_)))
            })
            .collect();
        line(
            &mut out,
            &mut self
                .columns
                .iter()
                .enumerate()
                .map(|(i, h)| (widths[i], h.name.as_str(), !left[i])),
        );
        for row in &rendered {
            line(
                &mut out,
                &mut row
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (widths[i], c.as_str(), !left[i])),
            );
        }
        out
    }

    /// One JSON object per row; durations and times as integer ns.
    pub fn to_json_lines(&self) -> String {
        self.rows
            .iter()
            .map(|row| json_line(&self.columns, row))
            .collect()
    }

    /// CSV with a header line (RFC 4180 quoting); durations and times as
    /// integer ns.
    pub fn to_csv(&self) -> String {
        let mut out = csv_header(&self.columns);
        for row in &self.rows {
            out.push_str(&csv_line(row));
        }
        out
    }
}

/// One row as a JSON object and a newline.
pub fn json_line(columns: &[Header], row: &[Cell]) -> String {
    let mut out = String::from("{");
    for (i, (cell, header)) in row.iter().zip(columns).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}:{}", json_string(&header.name), json_value(cell));
    }
    out.push_str("}\n");
    out
}

/// The CSV header line.
pub fn csv_header(columns: &[Header]) -> String {
    let names: Vec<String> = columns.iter().map(|h| csv_field(&h.name)).collect();
    names.join(",") + "\n"
}

/// One row as a CSV line.
pub fn csv_line(row: &[Cell]) -> String {
    let cells: Vec<String> = row
        .iter()
        .map(|cell| match cell {
            Cell::Null => String::new(),
            Cell::Int(n) => n.to_string(),
            Cell::Float(f) => f.to_string(),
            Cell::Text(t) => csv_field(t),
        })
        .collect();
    cells.join(",") + "\n"
}

/// A cell for people.
fn human(cell: &Cell, kind: &Kind, wall_offset: Option<i64>) -> String {
    match (cell, kind) {
        (Cell::Null, _) => "-".into(),
        (Cell::Int(ns), Kind::Duration) => duration(*ns as f64),
        (Cell::Float(ns), Kind::Duration) => duration(*ns),
        (Cell::Int(t), Kind::Time) => time(*t, wall_offset),
        (Cell::Int(n), _) => n.to_string(),
        (Cell::Float(f), _) => format!("{f:.2}"),
        (Cell::Text(t), _) => printable(t),
    }
}

/// `text` with its control characters escaped (`\u{1b}`): names come from
/// traced programs (a thread may name itself anything), and a terminal
/// escape in one must not reach the terminal of whoever reads the answer.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// `812ns`, `3.20us`, `51.3ms`, `2.000s`: three significant digits.
pub fn duration(ns: f64) -> String {
    let (value, unit) = match ns.abs() {
        a if a < 1e3 => return format!("{ns:.0}ns"),
        a if a < 1e6 => (ns / 1e3, "us"),
        a if a < 1e9 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    let decimals = match value.abs() {
        a if a < 10.0 => 2,
        a if a < 100.0 => 1,
        _ => 0,
    };
    format!("{value:.decimals$}{unit}")
}

/// A monotonic time as UTC wall-clock time when the offset is known,
/// else as seconds since boot.
pub fn time(monotonic: i64, wall_offset: Option<i64>) -> String {
    let Some(offset) = wall_offset else {
        return format!("{:.6}", monotonic as f64 / 1e9);
    };
    let wall = monotonic + offset;
    let (secs, nanos) = (
        wall.div_euclid(1_000_000_000),
        wall.rem_euclid(1_000_000_000),
    );
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        nanos / 1000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn json_value(cell: &Cell) -> String {
    match cell {
        Cell::Int(n) => n.to_string(),
        Cell::Float(f) if f.is_finite() => f.to_string(),
        Cell::Null | Cell::Float(_) => "null".into(),
        Cell::Text(t) => json_string(t),
    }
}

fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        Answer {
            columns: vec![
                Header {
                    name: "name".into(),
                    kind: Kind::Int,
                },
                Header {
                    name: "p99(dur)".into(),
                    kind: Kind::Duration,
                },
            ],
            rows: vec![
                vec![Cell::Text("read, \"x\"".into()), Cell::Int(51_300_000)],
                vec![Cell::Text("close".into()), Cell::Null],
            ],
            ..Answer::default()
        }
    }

    #[test]
    fn names_reach_tables_with_control_characters_escaped() {
        assert_eq!(printable("redis-server"), "redis-server");
        assert_eq!(
            printable("evil\u{1b}]0;owned\u{7}"),
            "evil\\u{1b}]0;owned\\u{7}"
        );
        let answer = Answer {
            columns: vec![Header {
                name: "comm".into(),
                kind: Kind::Int,
            }],
            rows: vec![vec![Cell::Text("a\u{1b}[2Jb".into())]],
            ..Answer::default()
        };
        assert!(!answer.to_table(None).contains('\u{1b}'));
        assert_eq!(answer.text(0, 0, None), "a\\u{1b}[2Jb");
    }

    #[test]
    fn to_table_aligns_and_humanizes() {
        assert_eq!(
            answer().to_table(None),
            "name       p99(dur)\nread, \"x\"    51.3ms\nclose             -\n"
        );
    }

    #[test]
    fn to_json_lines_and_csv_keep_ns() {
        assert_eq!(
            answer().to_json_lines(),
            "{\"name\":\"read, \\\"x\\\"\",\"p99(dur)\":51300000}\n{\"name\":\"close\",\"p99(dur)\":null}\n"
        );
        assert_eq!(
            answer().to_csv(),
            "name,p99(dur)\n\"read, \"\"x\"\"\",51300000\nclose,\n"
        );
    }

    #[test]
    fn duration_three_significant_digits() {
        assert_eq!(duration(812.0), "812ns");
        assert_eq!(duration(3_204.0), "3.20us");
        assert_eq!(duration(51_300_000.0), "51.3ms");
        assert_eq!(duration(2e9), "2.00s");
    }

    #[test]
    fn time_prints_utc_with_offset() {
        // 2026-11-22 05:31:10.5 UTC is 1795325470.5 s after the epoch.
        let wall = 1_795_325_470_500_000_000i64;
        assert_eq!(
            time(1_000, Some(wall - 1_000)),
            "2026-11-22 05:31:10.500000"
        );
        assert_eq!(time(1_500_000_000, None), "1.500000");
    }
}
