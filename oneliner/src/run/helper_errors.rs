//! bpftrace's `-k` and `-kk`: a warning where a map helper fails, with
//! where in the program, as bpftrace prints it (`stdin:1:22-34: WARNING:
//! Failed to map_delete_elem: No such file or directory (-2)`, then the
//! line and `~` under the call), or in `-f json` its `helper_error`
//! record. weft's maps are its own, so it says what bpftrace's helper
//! would have: `-k` a delete of a key the map lacks, `-kk` a read of one.

use crate::{OutputFormat, error::Span};

/// Where warnings point: the program's name (`stdin` for `-e`, else the
/// script's path) and its text.
#[derive(Debug, Clone, Default)]
pub struct Source {
    pub name: String,
    pub text: String,
}

/// `map_delete_elem`'s failure on a missing key: ENOENT.
pub const NO_ENTRY: i32 = -2;

/// The warning for `helper`'s failure with `retcode` at `span` of
/// `source`, as bpftrace prints it in `format`.
pub fn render(
    format: OutputFormat,
    source: &Source,
    helper: &str,
    retcode: i32,
    span: Span,
) -> String {
    let text = &source.text;
    let start = span.start.min(text.len());
    let end = (span.start + span.len).min(text.len());
    let line = text[..start].matches('\n').count() + 1;
    let last_line = text[..end].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..start].chars().count() + 1;
    if format == OutputFormat::Json {
        return format!(
            "{{\"type\": \"helper_error\", \"helper\": \"{helper}\", \"retcode\": {retcode}, \"line\": {line}, \"col\": {column}}}\n"
        );
    }
    let reason = if retcode < 0 {
        format!("{} ({retcode})", super::strerror(i64::from(-retcode)))
    } else {
        retcode.to_string()
    };
    let message = format!("WARNING: Failed to {helper}: {reason}");
    if last_line > line {
        return format!("{}:{line}-{last_line}: {message}\n", source.name);
    }
    let end_column = column + text[start..end].chars().count();
    let source_line = text[line_start..].lines().next().unwrap_or_default();
    // Tabs as four blanks, as bpftrace prints them.
    let shown = source_line.replace('\t', "    ");
    let mut marker = String::new();
    for (i, c) in source_line.chars().enumerate().take(end_column - 1) {
        let mark = if i + 1 < column { ' ' } else { '~' };
        let width = if c == '\t' { 4 } else { 1 };
        marker.extend(std::iter::repeat_n(mark, width));
    }
    format!(
        "{}:{line}:{column}-{end_column}: {message}\n{shown}\n{marker}\n",
        source.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_read_as_bpftrace_s() {
        let source = Source {
            name: "stdin".into(),
            text: "i:ms:100 { @[1] = 1; delete(@[2]); exit(); }".into(),
        };
        let delete = Span::new(21, 12);
        assert_eq!(
            render(
                OutputFormat::Text,
                &source,
                "map_delete_elem",
                NO_ENTRY,
                delete
            ),
            "stdin:1:22-34: WARNING: Failed to map_delete_elem: No such file or directory (-2)\n\
             i:ms:100 { @[1] = 1; delete(@[2]); exit(); }\n                     ~~~~~~~~~~~~\n"
        );
        assert_eq!(
            render(
                OutputFormat::Json,
                &source,
                "map_lookup_elem",
                0,
                Span::new(28, 4)
            ),
            "{\"type\": \"helper_error\", \"helper\": \"map_lookup_elem\", \"retcode\": 0, \"line\": 1, \"col\": 29}\n"
        );
    }
}
