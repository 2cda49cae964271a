//! The lines bpftrace's scripts give its C preprocessor, before parsing.
//!
//! bpftrace runs a script's `#` lines through a preprocessor to reach
//! kernel headers. weft takes types from the kernel's BTF, as bpftrace
//! does when the kernel has it: so `#include` lines are not needed, code
//! under `#ifndef BPFTRACE_HAVE_BTF` is left out (its `#else` kept), and a
//! `#!` line starts a script that runs itself. `#define NAME VALUE` names
//! a value, which the parser reads as an expression. Each line left out
//! becomes blanks of the same length, so errors still point into the text
//! given.

use crate::error::{Error, Result, Span};

/// A script after its preprocessor lines.
pub struct Preprocessed {
    /// The text with its preprocessor lines, and the code they leave out,
    /// blank.
    pub text: String,
    /// `#define NAME VALUE` lines in kept code: each name and where its
    /// value is in the text.
    pub defines: Vec<(String, Span)>,
}

/// Reads `text`'s preprocessor lines.
pub fn preprocess(text: &str) -> Result<Preprocessed> {
    let mut out = String::with_capacity(text.len());
    let mut defines = Vec::new();
    // Per open `#if`: whether its code is kept.
    let mut open: Vec<bool> = Vec::new();
    let mut at = 0;
    // Whether the line starts inside a `/* */` comment (no directive there).
    let mut in_comment = false;
    for line in text.split_inclusive('\n') {
        let directive = line.trim_start();
        let kept = open.iter().all(|k| *k);
        let starts_in_comment = in_comment;
        in_comment = ends_in_comment(line, in_comment);
        let blank = if let Some(rest) = directive.strip_prefix('#').filter(|_| !starts_in_comment) {
            let word = rest.split_whitespace().next().unwrap_or_default();
            let arg = rest.split_whitespace().nth(1).unwrap_or_default();
            let here = || {
                Span::new(
                    at + line.len() - directive.len(),
                    directive.trim_end().len(),
                )
            };
            match word {
                _ if rest.starts_with('!') => {}
                "include" => {}
                "ifndef" | "ifdef" if arg == "BPFTRACE_HAVE_BTF" => open.push(word == "ifdef"),
                "else" => match open.last_mut() {
                    Some(kept) => *kept = !*kept,
                    None => return Err(Error::new(here(), "`#else` without `#if`")),
                },
                "endif" => {
                    if open.pop().is_none() {
                        return Err(Error::new(here(), "`#endif` without `#if`"));
                    }
                }
                _ if !kept => {}
                "define" => defines.push(define(rest, at + line.len() - rest.len(), here())?),
                _ => {
                    return Err(Error::new(
                        here(),
                        format!(
                            "`#{word}` is not supported: weft takes types from the kernel's BTF \
                             (only #include, #define NAME VALUE and #ifndef/#ifdef \
                             BPFTRACE_HAVE_BTF are read)"
                        ),
                    ));
                }
            }
            true
        } else {
            !kept
        };
        if blank {
            for c in line.chars() {
                match c {
                    '\n' => out.push('\n'),
                    c => out.extend(std::iter::repeat_n(' ', c.len_utf8())),
                }
            }
        } else {
            out.push_str(line);
        }
        at += line.len();
    }
    if !open.is_empty() {
        return Err(Error::new(
            Span::new(text.len(), 0),
            "`#if` without `#endif`",
        ));
    }
    Ok(Preprocessed { text: out, defines })
}

/// `rest` of a `#define` line (from `define`), which starts at `at` in the
/// text: the name and where its value is.
fn define(rest: &str, at: usize, line: Span) -> Result<(String, Span)> {
    let after = rest
        .trim_start()
        .strip_prefix("define")
        .unwrap_or_default()
        .trim_start();
    let name_len = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(after.len());
    let (name, value) = after.split_at(name_len);
    let value_text = value.trim();
    let bad = |what: &str| {
        Err(Error::new(
            line,
            format!("weft reads `#define NAME VALUE`, with an expression as the value: {what}"),
        ))
    };
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return bad("the name is missing");
    }
    if value.starts_with('(') {
        return bad("macros with arguments are not supported");
    }
    if value_text.is_empty() {
        return bad("the value is missing");
    }
    if value_text.ends_with('\\') {
        return bad("a value continued on the next line is not supported");
    }
    let name_at = at + rest.len() - after.len();
    let value_at = name_at + name_len + (value.len() - value.trim_start().len());
    Ok((name.to_owned(), Span::new(value_at, value_text.len())))
}

/// Whether a `/* */` comment is open at the end of `line`, given whether
/// one was at its start (strings and `//` comments hide delimiters).
fn ends_in_comment(line: &str, mut in_comment: bool) -> bool {
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_comment, c, chars.peek()) {
            (true, '*', Some('/')) => {
                chars.next();
                in_comment = false;
            }
            (false, '/', Some('*')) => {
                chars.next();
                in_comment = true;
            }
            (false, '/', Some('/')) => break,
            (false, '"', _) => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    in_comment
}

#[cfg(test)]
mod tests {
    use super::preprocess;

    #[test]
    fn headers_and_the_no_btf_branch_are_left_out_in_place() {
        let script = "#!/usr/bin/env bpftrace\n#ifndef BPFTRACE_HAVE_BTF\n#include <linux/sched.h>\nstruct x { int a; };\n#else\n#include <sys/socket.h>\n#endif\nBEGIN { }\n";
        let out = preprocess(script).unwrap().text;
        assert_eq!(out.len(), script.len());
        assert_eq!(out.trim(), "BEGIN { }");
        assert_eq!(out.find("BEGIN"), script.find("BEGIN"));
    }

    #[test]
    fn a_hash_inside_a_comment_is_not_a_directive() {
        let script = "/*\n # need changes\n */\nBEGIN { printf(\"/*\"); }\n#include <x.h>\n";
        let out = preprocess(script).unwrap().text;
        assert!(out.contains("# need changes"), "{out}");
        assert!(!out.contains("#include"), "{out}");
    }

    /// A define's name and where its value stands, in kept code only.
    #[test]
    fn defines_name_values_where_they_stand() {
        let script = "#ifndef BPFTRACE_HAVE_BTF\n#define GONE 1\n#endif\n#  define  MS (1000 * 1000) // ns\nBEGIN {}";
        let out = preprocess(script).unwrap();
        let [(name, value)] = out.defines.as_slice() else {
            panic!("{:?}", out.defines)
        };
        assert_eq!(name, "MS");
        assert_eq!(
            &script[value.start..value.start + value.len],
            "(1000 * 1000) // ns"
        );
        assert_eq!(out.text.trim(), "BEGIN {}");
    }

    #[test]
    fn other_directives_and_unbalanced_ones_are_errors() {
        for (script, message) in [
            ("#define F(x) x\nBEGIN {}", "macros with arguments"),
            ("#define X\nBEGIN {}", "the value is missing"),
            ("#define 1X 2\nBEGIN {}", "the name is missing"),
            ("#undef X\nBEGIN {}", "`#undef` is not supported"),
        ] {
            let error = preprocess(script).err().expect(script).to_string();
            assert!(error.contains(message), "{script}: {error}");
        }
        assert!(preprocess("#ifndef BPFTRACE_HAVE_BTF\nBEGIN {}").is_err());
        assert!(preprocess("#endif\n").is_err());
    }
}
